package concurrency

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"templatefs/leasefs"
	"templatefs/store"
)

// Op is the kind of an operation.
type Op uint8

// Operations, with the call that performs each (Input.Dir says where).
const (
	OpPublish    Op = iota + 1 // `templatefs publish`, which the daemon runs (store.PublishWith): no tree operation publishes
	OpAcquire                  // open(O_CREAT|O_EXCL) of <dir>/<gen>/leases/<clone>
	OpRelease                  // unlink(2) of leases/<clone> or <dir>/<gen>/leases/<clone>: refused (EBUSY) for a reserved lease
	OpTombstone                // rename(2) of generations/<gen> to tombstones/<gen>, or "tombstone" written to <dir>/<gen>/ctl
	OpLift                     // rename(2) of <dir>/<gen> to generations/<gen>, or "lift" written to <dir>/<gen>/ctl
	OpRetire                   // rmdir(2) of <dir>/<gen>, or "retire" written to <dir>/<gen>/ctl
	OpList                     // readdir of <dir>/: generations/, tombstones/, retiring/ or leases/
	OpListLeases               // readdir of <dir>/<gen>/leases
	OpStatus                   // read of <dir>/<gen>/status
	// OpBind: process Input.Proc, started by OpSpawn with the launch ID of
	// the lease Input.Clone held as sequence Input.Seq in its environment
	// (store.LaunchEnv), opens <dir>/<gen>/payload/state.bin (a process
	// not spawned yet is spawned by the OpBind itself). The open of
	// a reserved lease's own generation binds the lease to it (refused,
	// EPERM, where the generation may not be restored). With Input.ByPID
	// instead: a new process Input.Proc without a launch ID, and
	// "pid <its pid>" written to leases/<clone>, which binds a reserved
	// lease (EPERM as above; EBUSY for a lease bound or exited). On
	// success the process lives on until OpExit or OpKill ends it; on
	// failure it exits before OpBind returns.
	OpBind
	// OpExit: process Input.Proc ends (SIGKILL from the test, not through
	// the mount). The daemon watches the process of every bound lease and
	// records the lease exited: it stays until rm (which settles it) but
	// no longer holds its generation, so a retiring generation whose
	// leases have all exited is deleted. That happens after the process
	// ended, asynchronously: OpExit returns only once the test has seen
	// the lease exited (or gone) through the mount and such a generation
	// gone, so the model takes the whole transition as OpExit's.
	OpExit
	// OpCancel: "cancel" written to leases/<clone> or
	// <dir>/<gen>/leases/<clone>: ends a reserved lease, refused (EBUSY)
	// while a process carries its launch ID, or for a bound lease.
	OpCancel
	// OpKill: "kill" written to leases/<clone>: SIGKILL of the bound
	// process through the daemon, then the release; refused (EBUSY) for a
	// reserved lease.
	OpKill
	// OpSpawn: process Input.Proc starts with the launch ID of the lease
	// Input.Clone held as sequence Input.Seq in its environment, before
	// its OpBind: from then on it carries the launch ID (cancel sees it),
	// though it has not opened anything yet.
	OpSpawn
)

var opNames = [...]string{
	OpPublish: "publish", OpAcquire: "acquire", OpRelease: "release", OpTombstone: "tombstone", OpLift: "lift",
	OpRetire: "retire", OpList: "list", OpListLeases: "list-leases", OpStatus: "status",
	OpBind: "bind", OpExit: "exit", OpCancel: "cancel", OpKill: "kill", OpSpawn: "spawn",
}

// String names the operation, e.g. "acquire".
func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Dir is the top directory an operation's path walks through, or DirStore
// for OpPublish, a call to the store.
type Dir uint8

// Directories (docs/tree.md): each generation state has its own.
const (
	DirStore       Dir = iota // no path: `templatefs publish`
	DirGenerations            // generations/: published generations
	DirTombstones             // tombstones/: tombstoned generations
	DirRetiring               // retiring/: retiring generations, until their last lease is released
	DirLeases                 // leases/: every lease
)

var dirNames = [...]string{DirStore: "store", DirGenerations: "generations", DirTombstones: "tombstones", DirRetiring: "retiring", DirLeases: "leases"}

// String returns the directory's name in the tree, or "store".
func (d Dir) String() string {
	if int(d) < len(dirNames) {
		return dirNames[d]
	}
	return fmt.Sprintf("Dir(%d)", uint8(d))
}

// AllGroups is the Input.Group of a listing of a top directory, which
// shows every group's names; Partition splits it.
const AllGroups = -1

// Input is what an operation asked for: porcupine.Operation.Input.
type Input struct {
	Op    Op
	Dir   Dir
	Group int // lease group (see the package doc), or AllGroups
	Gen   store.GenerationID
	Clone string
	// Ctl says that OpTombstone, OpLift or OpRetire writes its command to
	// <dir>/<gen>/ctl instead of renaming or removing the directory.
	Ctl bool
	// Eligible says, for OpPublish, whether the capture is inside its
	// restore window under the store's fixed host facts.
	Eligible bool
	// Seq is, for OpBind, the sequence number of the lease whose launch
	// ID the process carries (Output.Seq of the OpAcquire that made it).
	Seq uint64
	// Launch is that lease's launch ID, for the operation to use; the
	// model goes by Seq.
	Launch string
	// Proc names, for OpBind and OpExit, the process: a number the
	// clients give each process they start, never reused.
	Proc int
	// ByPID says that OpBind binds by writing "pid N" to leases/<clone>
	// instead of by an open with the launch ID.
	ByPID bool
	// Call is the operation's call time, equal to porcupine.Operation.Call
	// (the model needs it for retirement deadlines).
	Call int64
}

// Output is what an operation returned: porcupine.Operation.Output.
type Output struct {
	// Result is ResultOK, or the errno's name ("ENOENT"), or for OpPublish
	// "error: " and the error's text.
	Result  string
	Gen     store.GenerationID    // OpPublish: the new generation
	Names   []string              // OpList, OpListLeases: the names listed, sorted
	State   store.GenerationState // OpStatus: the state line
	Granted bool                  // OpStatus: new_leases says granted
	Seq     uint64                // OpAcquire: the new lease's sequence number (read from the created file)
	// Return is the operation's return time, equal to
	// porcupine.Operation.Return.
	Return int64
}

// ResultOK is the Result of an operation that succeeded.
const ResultOK = "OK"

// ResultKilled is the Result of an OpBind whose process died of SIGKILL
// before it reported its open: its open bound the lease, and a
// concurrent OpKill of that lease killed it.
const ResultKilled = "killed"

// Errno names the model expects from tree operations.
const (
	errENOENT = "ENOENT"
	errEEXIST = "EEXIST"
	errEBUSY  = "EBUSY"
	errEPERM  = "EPERM"
	errESTALE = "ESTALE"
)

// The errnos of refusals by generation state, from leasefs's error table.
var (
	errnoRetiring          = errnoOf(store.ErrRetiring)
	errnoNotTombstoned     = errnoOf(store.ErrNotTombstoned)
	errnoRetirementPending = errnoOf(leasefs.ErrRetirementPending)
)

// errnoOf maps an error to its errno name by leasefs's table; an error
// without a row is EIO, as leasefs.ToErrno maps it.
func errnoOf(err error) string {
	for _, r := range leasefs.ErrnoTable() {
		if errors.Is(err, r.Err) {
			return r.Errno.String()
		}
	}
	return leasefs.EIO.String()
}

// path is what the operation did, e.g. "rmdir tombstones/g000002".
func (in Input) path() string {
	gen := in.Dir.String() + "/" + in.Gen.String()
	if in.Ctl {
		return fmt.Sprintf("write %q to %s/ctl", in.Op.String(), gen)
	}
	switch in.Op {
	case OpPublish:
		return "templatefs publish"
	case OpAcquire:
		return "create " + gen + "/leases/" + in.Clone
	case OpRelease:
		if in.Dir == DirLeases {
			return "unlink leases/" + in.Clone
		}
		return "unlink " + gen + "/leases/" + in.Clone
	case OpTombstone:
		return "rename " + gen + " tombstones/" + in.Gen.String()
	case OpLift:
		return "rename " + gen + " generations/" + in.Gen.String()
	case OpRetire:
		return "rmdir " + gen
	case OpList:
		return "readdir " + in.Dir.String() + "/"
	case OpListLeases:
		return "readdir " + gen + "/leases/"
	case OpStatus:
		return "read " + gen + "/status"
	case OpBind:
		if in.ByPID {
			return fmt.Sprintf("write \"pid\" of process %d to leases/%s", in.Proc, in.Clone)
		}
		return fmt.Sprintf("process %d with the launch ID of %s (seq %d) opens %s/payload/state.bin", in.Proc, in.Clone, in.Seq, gen)
	case OpExit:
		return fmt.Sprintf("process %d ends", in.Proc)
	case OpSpawn:
		return fmt.Sprintf("process %d starts with the launch ID of %s (seq %d)", in.Proc, in.Clone, in.Seq)
	case OpCancel, OpKill:
		if in.Dir == DirLeases {
			return fmt.Sprintf("write %q to leases/%s", in.Op.String(), in.Clone)
		}
		return fmt.Sprintf("write %q to %s/leases/%s", in.Op.String(), gen, in.Clone)
	}
	return ""
}

// Describe renders one operation for logs and porcupine's visualization,
// e.g. "acquire: create generations/g000002/leases/k0-c1 -> EEXIST".
func Describe(in Input, out Output) string {
	s := fmt.Sprintf("%s: %s -> %s", in.Op, in.path(), out.Result)
	if out.Result != ResultOK {
		return s
	}
	switch in.Op {
	case OpPublish:
		eligible := "eligible"
		if !in.Eligible {
			eligible = "ineligible"
		}
		s += fmt.Sprintf(" %s (%s)", out.Gen, eligible)
	case OpAcquire:
		s += fmt.Sprintf(" seq %d", out.Seq)
	case OpList, OpListLeases:
		s += " [" + strings.Join(out.Names, " ") + "]"
	case OpStatus:
		granted := "refused"
		if out.Granted {
			granted = "granted"
		}
		s += fmt.Sprintf(" state %s, new leases %s", out.State, granted)
	}
	return s
}

// genRec is the model of one existing generation.
type genRec struct {
	state    store.GenerationState
	eligible bool
	// deadline is set for a retiring generation without leases: the
	// return time of the call that left it so. The store deletes it before
	// then; calls made after it see it gone.
	deadline int64
}

// leaseRec is the model of one lease: its generation, its sequence
// number, the process it is bound to (0: reserved), and whether that
// process has exited and the daemon recorded it.
type leaseRec struct {
	gen    store.GenerationID
	seq    uint64
	proc   int
	exited bool
}

// procRec is a live process started by OpSpawn or OpBind: the lease whose
// launch ID it carries (clone "" for none: ByPID). deadline is set for
// one whose open failed: it has exited by then (it exits before its
// OpBind returns).
type procRec struct {
	clone    string
	seq      uint64
	deadline int64
	// started is the return time of the OpSpawn that started it (0 for
	// a process an OpBind started).
	started int64
}

// state is the model's state: the existing generations of one group, its
// leases, and the live processes carrying their launch IDs. It is
// immutable; key identifies it for Equal and Hash.
type state struct {
	gens   map[store.GenerationID]genRec
	leases map[string]leaseRec // by clone ID
	procs  map[int]procRec
	key    string
}

func newState(gens map[store.GenerationID]genRec, leases map[string]leaseRec, procs map[int]procRec) state {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(gens)) {
		g := gens[id]
		fmt.Fprintf(&b, "%s=%s", id, g.state)
		if !g.eligible {
			b.WriteString(",ineligible")
		}
		if g.deadline != 0 {
			fmt.Fprintf(&b, ",gone-by-%d", g.deadline)
		}
		b.WriteByte(' ')
	}
	b.WriteString("|")
	for _, c := range slices.Sorted(maps.Keys(leases)) {
		l := leases[c]
		fmt.Fprintf(&b, " %s=%s#%d", c, l.gen, l.seq)
		if l.proc != 0 {
			fmt.Fprintf(&b, ",bound-to-%d", l.proc)
		}
		if l.exited {
			b.WriteString(",exited")
		}
	}
	if len(procs) > 0 {
		b.WriteString(" |")
	}
	for _, p := range slices.Sorted(maps.Keys(procs)) {
		r := procs[p]
		fmt.Fprintf(&b, " proc-%d=%s#%d", p, r.clone, r.seq)
		if r.deadline != 0 {
			fmt.Fprintf(&b, ",gone-by-%d", r.deadline)
		}
		if r.started != 0 {
			fmt.Fprintf(&b, ",started-by-%d", r.started)
		}
	}
	return state{gens: gens, leases: leases, procs: procs, key: b.String()}
}

func (s state) withGen(id store.GenerationID, g genRec) state {
	gens := maps.Clone(s.gens)
	if gens == nil {
		gens = map[store.GenerationID]genRec{}
	}
	gens[id] = g
	return newState(gens, s.leases, s.procs)
}

func (s state) withoutGen(id store.GenerationID) state {
	gens := maps.Clone(s.gens)
	delete(gens, id)
	return newState(gens, s.leases, s.procs)
}

func (s state) withLease(clone string, l leaseRec) state {
	leases := maps.Clone(s.leases)
	if leases == nil {
		leases = map[string]leaseRec{}
	}
	leases[clone] = l
	return newState(s.gens, leases, s.procs)
}

// withoutLease ends clone's lease; if that was the last lease of a
// retiring generation, the generation must be gone by ret.
func (s state) withoutLease(clone string, ret int64) state {
	gen := s.leases[clone].gen
	leases := maps.Clone(s.leases)
	delete(leases, clone)
	n := newState(s.gens, leases, s.procs)
	return n.drained(gen, ret)
}

func (s state) withProc(p int, r procRec) state {
	procs := maps.Clone(s.procs)
	if procs == nil {
		procs = map[int]procRec{}
	}
	procs[p] = r
	return newState(s.gens, s.leases, procs)
}

func (s state) withoutProc(p int) state {
	if _, ok := s.procs[p]; !ok {
		return s
	}
	procs := maps.Clone(s.procs)
	delete(procs, p)
	return newState(s.gens, s.leases, procs)
}

// died ends process p: the leases bound to it become exited, and a
// retiring generation they were the last leases of must be gone by ret.
func (s state) died(p int, ret int64) state {
	n := s.withoutProc(p)
	for _, c := range slices.Sorted(maps.Keys(s.leases)) {
		if l := s.leases[c]; l.proc == p && !l.exited {
			l.exited = true
			n = n.withLease(c, l).drained(l.gen, ret)
		}
	}
	return n
}

// opener reports whether in's process may make its OpBind open: one
// spawned with in's launch ID that has bound nothing, or one not spawned
// yet.
func (s state) opener(in Input) bool {
	r, ok := s.procs[in.Proc]
	if !ok {
		return true
	}
	if r.clone != in.Clone || r.seq != in.Seq || r.deadline != 0 {
		return false
	}
	for _, l := range s.leases {
		if l.proc == in.Proc {
			return false
		}
	}
	return true
}

// openerFailed is the state after in's open failed: the process exits
// before its OpBind returns at ret, and until then carries the launch ID
// of the lease in.Clone held as in.Seq; if that lease is gone, no lease
// can ever have that sequence number again, and the process is dropped
// at once (fewer nondeterministic steps for porcupine to try).
func (s state) openerFailed(in Input, ret int64) state {
	if l, ok := s.leases[in.Clone]; !ok || l.seq != in.Seq {
		return s.withoutProc(in.Proc)
	}
	r, ok := s.procs[in.Proc]
	if !ok {
		r = procRec{clone: in.Clone, seq: in.Seq}
	}
	r.deadline = ret
	return s.withProc(in.Proc, r)
}

// alive reports whether process p runs.
func (s state) alive(p int) bool {
	_, ok := s.procs[p]
	return ok
}

// carriedBefore is carried for a cancel called at call: store.CancelLease
// reads /proc once, before its transaction, so a process that started
// while the cancel ran (its OpSpawn returned after call) may be missed,
// and the cancel succeed though the lease is still listed when that
// process already runs. Only processes started before the call surely
// count.
func (s state) carriedBefore(clone string, l leaseRec, call int64) bool {
	for _, r := range s.procs {
		if r.clone == clone && r.seq == l.seq && r.started < call {
			return true
		}
	}
	return false
}

// carried reports whether a live process carries the launch ID of
// clone's lease l.
func (s state) carried(clone string, l leaseRec) bool {
	for _, r := range s.procs {
		if r.clone == clone && r.seq == l.seq {
			return true
		}
	}
	return false
}

// drained sets gen's deletion deadline to ret (or keeps an earlier one) if
// it is retiring and holds no leases.
func (s state) drained(gen store.GenerationID, ret int64) state {
	g, ok := s.gens[gen]
	if !ok || g.state != store.Retiring || s.hasLeases(gen) {
		return s
	}
	if g.deadline == 0 || ret < g.deadline {
		g.deadline = ret
	}
	return s.withGen(gen, g)
}

// hasLeases reports whether gen holds a lease that keeps it: any but an
// exited one.
func (s state) hasLeases(gen store.GenerationID) bool {
	for _, l := range s.leases {
		if l.gen == gen && !l.exited {
			return true
		}
	}
	return false
}

// listedIn reports whether a generation in state st is listed under dir:
// each state has its own directory (leasefs).
func listedIn(dir Dir, st store.GenerationState) bool {
	switch dir {
	case DirGenerations:
		return st == store.Published
	case DirTombstones:
		return st == store.Tombstoned
	case DirRetiring:
		return st == store.Retiring
	}
	return false
}

// names is what a listing of dir shows.
func (s state) names(dir Dir) []string {
	var out []string
	if dir == DirLeases {
		for c := range s.leases {
			out = append(out, c)
		}
	}
	for id, g := range s.gens {
		if listedIn(dir, g.state) {
			out = append(out, id.String())
		}
	}
	slices.Sort(out)
	return out
}

// clonesOn is what a listing of gen's leases/ shows.
func (s state) clonesOn(gen store.GenerationID) []string {
	var out []string
	for c, l := range s.leases {
		if l.gen == gen {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// candidates are the states an operation called at call may see: the
// generations and processes whose deadline passed are gone; any other
// retiring generation without leases, or process whose open failed, may
// or may not be gone yet.
func (s state) candidates(call int64) []state {
	base := s
	var pending []func(state) state
	for _, id := range slices.Sorted(maps.Keys(s.gens)) {
		switch d := s.gens[id].deadline; {
		case d != 0 && d < call:
			base = base.withoutGen(id)
		case d != 0:
			pending = append(pending, func(c state) state { return c.withoutGen(id) })
		}
	}
	for _, p := range slices.Sorted(maps.Keys(s.procs)) {
		switch d := s.procs[p].deadline; {
		case d != 0 && d < call:
			base = base.withoutProc(p)
		case d != 0:
			pending = append(pending, func(c state) state { return c.withoutProc(p) })
		}
	}
	out := []state{base}
	for _, gone := range pending {
		for _, c := range out {
			out = append(out, gone(c))
		}
	}
	return out
}

// step returns every state the operation can lead to from s, none if s
// cannot explain its output.
func (s state) step(in Input, out Output) []any {
	var next []any
	for _, c := range s.candidates(in.Call) {
		if n, ok := c.apply(in, out); ok {
			next = append(next, n)
		}
	}
	return next
}

// apply is the sequential specification: whether the operation, taking
// effect atomically in state s, could return out, and the state after it.
func (s state) apply(in Input, out Output) (state, bool) {
	g, exists := s.gens[in.Gen]
	listed := exists && listedIn(in.Dir, g.state)
	lease, leased := s.leases[in.Clone]
	r := out.Result
	if r == errESTALE && in.Op == OpBind && in.ByPID {
		return s, !s.alive(in.Proc)
	}
	if r == errESTALE && in.Op == OpBind {
		// As below; the process exits before OpBind returns.
		return s.openerFailed(in, out.Return), s.opener(in)
	}
	if r == errESTALE && in.Op != OpPublish {
		// The kernel refused a lookup (see the package doc, Walks): the
		// call never reached templatefs.
		return s, true
	}
	switch in.Op {
	case OpPublish:
		// IDs are never reused (store.PublishWith); a reuse after deletion is
		// checked on the whole history, outside the model.
		if r != ResultOK || out.Gen == 0 || exists {
			return s, false
		}
		return s.withGen(out.Gen, genRec{state: store.Published, eligible: in.Eligible}), true

	case OpAcquire:
		// leasefs.FS.Create, store.AcquireLease: the clone's own lease is
		// checked before the generation (docs/tree.md, Operations).
		grantable := exists && g.state == store.Published && g.eligible
		switch {
		case r == errENOENT && !listed,
			r == errEEXIST && leased && lease.gen == in.Gen,
			r == errEBUSY && leased && lease.gen != in.Gen,
			r == errEPERM && !leased && exists && !grantable:
			return s, true
		case r == ResultOK && !leased && grantable && out.Seq != 0:
			return s.withLease(in.Clone, leaseRec{gen: in.Gen, seq: out.Seq}), true
		}

	case OpRelease:
		// store.ReleaseLease: a reserved lease only ends by cancel; a
		// bound one once its process has exited.
		mine := leased && (in.Dir == DirLeases || lease.gen == in.Gen)
		switch {
		case r == errENOENT && (!mine || in.Dir != DirLeases && !listed),
			r == errEBUSY && mine && (lease.proc == 0 || s.alive(lease.proc)):
			return s, true
		case r == ResultOK && mine && lease.proc != 0 && !s.alive(lease.proc):
			return s.withoutLease(in.Clone, out.Return), true
		}

	case OpCancel:
		// store.CancelLease: a reserved lease no live process carries
		// the launch ID of.
		mine := leased && (in.Dir == DirLeases || lease.gen == in.Gen)
		switch {
		case r == errENOENT && (!mine || in.Dir != DirLeases && !listed),
			r == errEBUSY && mine && (lease.proc != 0 || s.carried(in.Clone, lease)):
			return s, true
		case r == ResultOK && mine && lease.proc == 0 && !s.carriedBefore(in.Clone, lease, in.Call):
			return s.withoutLease(in.Clone, out.Return), true
		}

	case OpKill:
		// store.KillLease: SIGKILL of the bound process, then the
		// release; a reserved lease has no process.
		switch {
		case r == errENOENT && !leased,
			r == errEBUSY && leased && lease.proc == 0:
			return s, true
		case r == ResultOK && leased && lease.proc != 0:
			return s.died(lease.proc, out.Return).withoutLease(in.Clone, out.Return), true
		}

	case OpBind:
		// leasefs.FS.Open of a payload, store.BindLaunched: only the
		// launch ID of a reserved lease on the opened generation binds.
		if in.ByPID {
			if s.alive(in.Proc) {
				return s, false // process numbers are never reused
			}
			return s.bindByPID(in, out)
		}
		if !s.opener(in) {
			return s, false
		}
		match := leased && lease.seq == in.Seq && lease.gen == in.Gen && lease.proc == 0
		grantable := exists && g.state == store.Published && g.eligible
		carrier, spawned := s.procs[in.Proc]
		if !spawned {
			carrier = procRec{clone: in.Clone, seq: in.Seq}
		}
		// The walk to the payload may have seen the generation listed in
		// an earlier state (package doc, Walks): the open goes by the
		// generation, wherever it is now, as acquire's EPERM does.
		switch {
		case (r == ResultOK || r == ResultKilled) && listed && match && grantable:
			lease.proc = in.Proc
			return s.withLease(in.Clone, lease).withProc(in.Proc, carrier), true
		case r == ResultOK && exists && !match:
			return s.withProc(in.Proc, carrier), true
		case r == errENOENT && !listed,
			r == errEPERM && exists && match && !grantable:
			return s.openerFailed(in, out.Return), true
		}

	case OpSpawn:
		if s.alive(in.Proc) {
			return s, false // process numbers are never reused
		}
		return s.withProc(in.Proc, procRec{clone: in.Clone, seq: in.Seq, started: out.Return}), r == ResultOK

	case OpExit:
		// The process ends; the lease it bound (if any) becomes exited
		// and stays until rm or kill.
		return s.died(in.Proc, out.Return), r == ResultOK

	case OpTombstone:
		// store.Tombstone is idempotent: a generation tombstoned or
		// retiring since the walk stays so.
		switch {
		case r == errENOENT && !listed:
			return s, true
		case r == ResultOK && exists:
			if g.state == store.Published {
				g.state = store.Tombstoned
				return s.withGen(in.Gen, g), true
			}
			return s, true
		}

	case OpLift:
		// store.Lift: a published generation stays so; a retiring one is
		// refused.
		switch {
		case r == errENOENT && !listed,
			r == errnoRetiring && exists && g.state == store.Retiring:
			return s, true
		case r == ResultOK && exists && g.state != store.Retiring:
			g.state = store.Published
			return s.withGen(in.Gen, g), true
		}

	case OpRetire:
		// store.Retire deletes a generation without leases before it
		// returns, and retries a pending deletion when called again;
		// rmdir of retiring/<gen> then refuses if leases remain.
		pending := !in.Ctl && in.Dir == DirRetiring && s.hasLeases(in.Gen)
		switch {
		case r == errENOENT && !listed,
			r == errnoNotTombstoned && exists && g.state == store.Published,
			r == errnoRetirementPending && pending && exists && g.state == store.Retiring:
			return s, true
		case r == ResultOK && exists && g.state != store.Published && !pending:
			g.state = store.Retiring
			return s.withGen(in.Gen, g).drained(in.Gen, out.Return), true
		}

	case OpList:
		return s, r == ResultOK && slices.Equal(out.Names, s.names(in.Dir))

	case OpListLeases:
		switch {
		case r == errENOENT && !listed:
			return s, true
		case r == ResultOK && exists:
			return s, slices.Equal(out.Names, s.clonesOn(in.Gen))
		}

	case OpStatus:
		switch {
		case r == errENOENT && !listed:
			return s, true
		case r == ResultOK && exists:
			return s, out.State == g.state && out.Granted == (g.state == store.Published && g.eligible)
		}
	}
	return s, false
}

// bindByPID is OpBind with Input.ByPID: store.BindLeaseSeq through
// "pid N" written to leases/<clone>. The process carries no launch ID.
func (s state) bindByPID(in Input, out Output) (state, bool) {
	lease, leased := s.leases[in.Clone]
	g := s.gens[lease.gen]
	grantable := g.state == store.Published && g.eligible
	switch r := out.Result; {
	case r == errENOENT && !leased,
		r == errEBUSY && leased && lease.proc != 0,
		r == errEPERM && leased && lease.proc == 0 && !grantable:
		return s, true // the process, carrying nothing, exits before OpBind returns
	case r == ResultOK && leased && lease.proc == 0 && grantable:
		lease.proc = in.Proc
		return s.withLease(in.Clone, lease).withProc(in.Proc, procRec{}), true
	}
	return s, false
}

// Model returns the porcupine model of the tree's rules (see the package
// doc), with Partition as its partition function. Operations must carry
// an Input and an Output, with Input.Call and Output.Return equal to the
// operation's Call and Return.
func Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: Partition,
		Init:      func() []any { return []any{newState(nil, nil, nil)} },
		Step: func(st, in, out any) []any {
			return st.(state).step(in.(Input), out.(Output))
		},
		Equal: func(a, b any) bool { return a.(state).key == b.(state).key },
		Hash: func(st any) uint64 {
			h := fnv.New64a()
			h.Write([]byte(st.(state).key))
			return h.Sum64()
		},
		DescribeOperation: func(in, out any) string { return Describe(in.(Input), out.(Output)) },
		DescribeState:     func(st any) string { return st.(state).key },
	}
	return nm.ToModel()
}

// Partition splits a history into one history per lease group, in group
// order (see the package doc). A generation belongs to the group whose
// OpPublish returned it, a clone ID to the group of the operations naming
// it. A listing with Group AllGroups is copied into every group, holding
// that group's names and any name no group owns.
func Partition(history []porcupine.Operation) [][]porcupine.Operation {
	genGroup := map[string]int{}
	cloneGroup := map[string]int{}
	groups := map[int][]porcupine.Operation{}
	for _, op := range history {
		in, out := op.Input.(Input), op.Output.(Output)
		if in.Group == AllGroups {
			continue
		}
		groups[in.Group] = append(groups[in.Group], op)
		if in.Op == OpPublish && out.Result == ResultOK {
			genGroup[out.Gen.String()] = in.Group
		}
		if in.Clone != "" {
			cloneGroup[in.Clone] = in.Group
		}
	}
	for _, op := range history {
		in, out := op.Input.(Input), op.Output.(Output)
		if in.Group != AllGroups {
			continue
		}
		owners := genGroup
		if in.Dir == DirLeases {
			owners = cloneGroup
		}
		for group := range groups {
			part := op
			pin, pout := in, out
			pin.Group = group
			pout.Names = nil
			for _, name := range out.Names {
				if owner, ok := owners[name]; !ok || owner == group {
					pout.Names = append(pout.Names, name)
				}
			}
			part.Input, part.Output = pin, pout
			groups[group] = append(groups[group], part)
		}
	}
	out := make([][]porcupine.Operation, 0, len(groups))
	for _, group := range slices.Sorted(maps.Keys(groups)) {
		ops := groups[group]
		slices.SortStableFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		out = append(out, ops)
	}
	return out
}
