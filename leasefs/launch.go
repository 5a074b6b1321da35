package leasefs

import "fmt"

// bindOpener is the bind at a payload open (the supervisor seam): if c's
// process carries, in its initial environment, the launch ID of a
// Reserved lease on payload n's generation (store.LaunchEnv), the lease
// is bound to that process now, before the open is answered, with the
// eligibility of the generation checked again (store.BindLaunched). A
// refused bind refuses the open, with no fallback: it is logged here
// with its reason, since adapters log only refused mutations, and
// remembered as the generation's last refusal. Any other opener (no
// launch ID, one of another generation, a lease already bound) opens as
// before. An adapter that knows no pid passes 0: nothing is bound.
func (f *FS) bindOpener(n Node, c Caller) (err error) {
	if c.PID <= 0 {
		return nil
	}
	l, _, err := f.st.BindLaunched(n.Generation(), c.PID)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("open %s by pid %d: bind lease %q by launch ID: %w", n, c.PID, l.CloneID, err)
	f.refusals.note(n.Generation(), "bind "+l.CloneID+" at open", err)
	f.Refuse("open", n.String(), err)
	return err
}
