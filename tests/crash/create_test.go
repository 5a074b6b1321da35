//go:build linux

package crash

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"templatefs/store"
	"templatefs/tests/harness"
)

// TestKillWhileCreating: creators in one leases directory, each running
// `touch` (open(O_CREAT), close, whose error touch reports) in a loop and
// logging each name whose touch exited 0, while the daemon is killed with
// SIGKILL once some creates have been acknowledged. Creates in one
// directory share group commits and are acknowledged at close, so the
// kill lands with creates between their create and their close. After
// it, fsck finds nothing, and a new daemon shows every acknowledged
// lease, each reserved on its generation; a lease whose touch failed may
// or may not exist.
func TestKillWhileCreating(t *testing.T) {
	harness.RequireFUSE(t)
	const creators, perCreator, killAfter = 8, 200, 40
	f := template(t, t.TempDir()).copyTemplate(t)
	logs := t.TempDir()
	d := f.mount(t)
	dir := f.path("generations", g1, "leases")
	var procs []*exec.Cmd
	for k := range creators {
		script := `for i in $(seq "$3"); do touch "$1/w$2-$i" && echo "w$2-$i" >>"$4"; done`
		cmd := exec.Command("sh", "-c", script, "sh", dir, fmt.Sprint(k), fmt.Sprint(perCreator), filepath.Join(logs, fmt.Sprint(k)))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	acked := func() []string {
		var names []string
		for k := range creators {
			data, _ := os.ReadFile(filepath.Join(logs, fmt.Sprint(k)))
			names = append(names, strings.Fields(string(data))...)
		}
		return names
	}
	deadline := time.Now().Add(2 * time.Minute) // a hang bound, not a timing assertion
	for len(acked()) < killAfter {
		if time.Now().After(deadline) {
			t.Fatalf("only %d creates acknowledged in %v:\n%s", len(acked()), 2*time.Minute, d.Log())
		}
		time.Sleep(5 * time.Millisecond)
	}
	d.Kill()
	for _, p := range procs {
		p.Wait() // their touches on the dead mount fail; an exit status says nothing more
	}

	if got := f.fsckKinds(t); len(got) != 0 {
		t.Errorf("fsck right after the kill found %q", got)
	}
	names := acked()
	for _, name := range names {
		f.acked[name] = g1
	}
	d = f.mount(t)
	v := f.look(t)
	f.checkInvariants(t, v)
	for clone, l := range v.leases {
		if clone != "held" && (!strings.HasPrefix(clone, "w") || l.State != string(store.Reserved)) {
			t.Errorf("after the kill the mount shows lease %s = %+v, which no creator asked for as reserved", clone, l)
		}
	}
	t.Logf("%d creates acknowledged before the kill; %d leases after it", len(names), len(v.leases)-1)
	d.Stop()
	if got := f.fsckKinds(t, "--digests"); len(got) != 0 {
		t.Errorf("fsck after recovery found %q", got)
	}
}
