package concurrency

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"templatefs/store"
)

const g1, g2, g3 = store.GenerationID(1), store.GenerationID(2), store.GenerationID(3)

// op is one hand-made operation of client 0 in group 0 unless in says
// otherwise.
func op(call, ret int64, in Input, out Output) porcupine.Operation {
	in.Call, out.Return = call, ret
	return porcupine.Operation{ClientId: 0, Input: in, Call: call, Output: out, Return: ret}
}

func client(c int, o porcupine.Operation) porcupine.Operation {
	o.ClientId = c
	return o
}

func publish(call, ret int64, gen store.GenerationID, eligible bool) porcupine.Operation {
	return op(call, ret, Input{Op: OpPublish, Eligible: eligible}, Output{Result: ResultOK, Gen: gen})
}

// acquire is OpAcquire; a granted lease gets sequence number call.
func acquire(call, ret int64, dir Dir, gen store.GenerationID, clone, result string) porcupine.Operation {
	out := Output{Result: result}
	if result == ResultOK {
		out.Seq = uint64(call)
	}
	return op(call, ret, Input{Op: OpAcquire, Dir: dir, Gen: gen, Clone: clone}, out)
}

func release(call, ret int64, clone, result string) porcupine.Operation {
	return op(call, ret, Input{Op: OpRelease, Dir: DirLeases, Clone: clone}, Output{Result: result})
}

// command is OpCancel or OpKill written to leases/<clone>.
func command(call, ret int64, o Op, clone, result string) porcupine.Operation {
	return op(call, ret, Input{Op: o, Dir: DirLeases, Clone: clone}, Output{Result: result})
}

// bind is OpBind: process proc, carrying the launch ID of clone's lease
// of sequence seq, opens a payload of <dir>/<gen>.
func bind(call, ret int64, proc int, dir Dir, gen store.GenerationID, clone string, seq uint64, result string) porcupine.Operation {
	return op(call, ret, Input{Op: OpBind, Dir: dir, Gen: gen, Clone: clone, Seq: seq, Proc: proc}, Output{Result: result})
}

// bindPID is OpBind with ByPID: "pid" of process proc written to
// leases/<clone>.
func bindPID(call, ret int64, proc int, clone, result string) porcupine.Operation {
	return op(call, ret, Input{Op: OpBind, ByPID: true, Dir: DirLeases, Clone: clone, Proc: proc}, Output{Result: result})
}

func exit(call, ret int64, proc int) porcupine.Operation {
	return op(call, ret, Input{Op: OpExit, Proc: proc}, Output{Result: ResultOK})
}

func tombstone(call, ret int64, gen store.GenerationID, result string) porcupine.Operation {
	return op(call, ret, Input{Op: OpTombstone, Dir: DirGenerations, Gen: gen}, Output{Result: result})
}

// transition is OpLift or OpRetire (or a ctl write of OpTombstone) on
// <dir>/<gen>.
func transition(call, ret int64, o Op, dir Dir, gen store.GenerationID, ctl bool, result string) porcupine.Operation {
	return op(call, ret, Input{Op: o, Dir: dir, Gen: gen, Ctl: ctl}, Output{Result: result})
}

func list(call, ret int64, dir Dir, names ...string) porcupine.Operation {
	return op(call, ret, Input{Op: OpList, Dir: dir, Group: AllGroups}, Output{Result: ResultOK, Names: names})
}

func status(call, ret int64, dir Dir, gen store.GenerationID, result string, st store.GenerationState, granted bool) porcupine.Operation {
	return op(call, ret, Input{Op: OpStatus, Dir: dir, Gen: gen}, Output{Result: result, State: st, Granted: granted})
}

func TestModel(t *testing.T) {
	// setup: g1 published and eligible, returned at time 1.
	setup := []porcupine.Operation{publish(0, 1, g1, true)}
	tests := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"lease acquired after the tombstone returned", []porcupine.Operation{
			tombstone(2, 3, g1, ResultOK),
			acquire(4, 5, DirGenerations, g1, "c0", ResultOK),
		}, porcupine.Illegal},
		{"lease acquired while the tombstone runs", []porcupine.Operation{
			tombstone(2, 6, g1, ResultOK),
			client(1, acquire(3, 5, DirGenerations, g1, "c0", ResultOK)),
		}, porcupine.Ok},
		{"lease refused while the tombstone runs", []porcupine.Operation{
			tombstone(2, 6, g1, ResultOK),
			client(1, acquire(3, 5, DirGenerations, g1, "c0", errEPERM)),
		}, porcupine.Ok},
		{"lease refused on a published eligible generation", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", errEPERM),
		}, porcupine.Illegal},
		{"tombstoned generation not found under generations", []porcupine.Operation{
			tombstone(2, 3, g1, ResultOK),
			acquire(4, 5, DirGenerations, g1, "c0", errENOENT),
			acquire(6, 7, DirTombstones, g1, "c0", errEPERM),
			tombstone(8, 9, g1, errENOENT),
		}, porcupine.Ok},
		{"second exclusive create of a lease", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			acquire(4, 5, DirGenerations, g1, "c0", errEEXIST),
		}, porcupine.Ok},
		{"lease created twice", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			acquire(4, 5, DirGenerations, g1, "c0", ResultOK),
		}, porcupine.Illegal},
		{"clone leased on another generation", []porcupine.Operation{
			publish(2, 3, g2, true),
			acquire(4, 5, DirGenerations, g1, "c0", ResultOK),
			acquire(6, 7, DirGenerations, g2, "c0", errEBUSY),
		}, porcupine.Ok},
		{"clone leased on two generations", []porcupine.Operation{
			publish(2, 3, g2, true),
			acquire(4, 5, DirGenerations, g1, "c0", ResultOK),
			acquire(6, 7, DirGenerations, g2, "c0", ResultOK),
		}, porcupine.Illegal},
		{"ineligible generation refuses leases", []porcupine.Operation{
			publish(2, 3, g2, false),
			acquire(4, 5, DirGenerations, g2, "c0", errEPERM),
			status(6, 7, DirGenerations, g2, ResultOK, store.Published, false),
		}, porcupine.Ok},
		{"ineligible generation grants a lease", []porcupine.Operation{
			publish(2, 3, g2, false),
			acquire(4, 5, DirGenerations, g2, "c0", ResultOK),
		}, porcupine.Illegal},
		{"lease cancelled twice", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			command(4, 5, OpCancel, "c0", ResultOK),
			command(6, 7, OpCancel, "c0", ResultOK),
		}, porcupine.Illegal},
		{"concurrent cancels, one finds nothing", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			command(4, 8, OpCancel, "c0", ResultOK),
			client(1, command(5, 6, OpCancel, "c0", errENOENT)),
		}, porcupine.Ok},
		{"rm and kill of a reserved lease refused", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			release(4, 5, "c0", errEBUSY),
			command(6, 7, OpKill, "c0", errEBUSY),
			op(8, 9, Input{Op: OpListLeases, Dir: DirGenerations, Gen: g1}, Output{Result: ResultOK, Names: []string{"c0"}}),
		}, porcupine.Ok},
		{"rm ends a reserved lease", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			release(4, 5, "c0", ResultOK),
		}, porcupine.Illegal},
		{"open with the launch ID binds; rm refused until the process ends", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			bind(4, 5, 1, DirGenerations, g1, "c0", 2, ResultOK),
			release(6, 7, "c0", errEBUSY),
			command(8, 9, OpCancel, "c0", errEBUSY),
			exit(10, 11, 1),
			release(12, 13, "c0", ResultOK),
		}, porcupine.Ok},
		{"bound lease released while its process runs", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			bind(4, 5, 1, DirGenerations, g1, "c0", 2, ResultOK),
			release(6, 7, "c0", ResultOK),
		}, porcupine.Illegal},
		{"kill of a bound lease ends process and lease", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			bind(4, 5, 1, DirGenerations, g1, "c0", 2, ResultOK),
			command(6, 7, OpKill, "c0", ResultOK),
			release(8, 9, "c0", errENOENT),
			exit(10, 11, 1),
		}, porcupine.Ok},
		{"cancel refused while a process carries the launch ID", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			tombstone(4, 5, g1, ResultOK),
			bind(6, 7, 1, DirTombstones, g1, "c0", 2, errEPERM),
			command(8, 9, OpCancel, "c0", ResultOK),
		}, porcupine.Ok},
		{"cancel while the refused opener still runs", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			tombstone(4, 5, g1, ResultOK),
			bind(6, 10, 1, DirTombstones, g1, "c0", 2, errEPERM),
			client(1, command(7, 8, OpCancel, "c0", errEBUSY)),
			command(11, 12, OpCancel, "c0", ResultOK),
		}, porcupine.Ok},
		{"cancel refused after the refused opener exited", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			tombstone(4, 5, g1, ResultOK),
			bind(6, 7, 1, DirTombstones, g1, "c0", 2, errEPERM),
			command(8, 9, OpCancel, "c0", errEBUSY),
		}, porcupine.Illegal},
		{"open of a tombstoned generation binds", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			tombstone(4, 5, g1, ResultOK),
			bind(6, 7, 1, DirTombstones, g1, "c0", 2, ResultOK),
		}, porcupine.Illegal},
		{"stale launch ID binds nothing", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			command(4, 5, OpCancel, "c0", ResultOK),
			acquire(6, 7, DirGenerations, g1, "c0", ResultOK),
			bind(8, 9, 1, DirGenerations, g1, "c0", 2, ResultOK),
			command(10, 11, OpKill, "c0", errEBUSY),
			exit(12, 13, 1),
			command(14, 15, OpCancel, "c0", ResultOK),
		}, porcupine.Ok},
		{"process carrying a live lease's launch ID blocks cancel", []porcupine.Operation{
			publish(2, 3, g2, true),
			acquire(4, 5, DirGenerations, g1, "c0", ResultOK),
			bind(6, 7, 1, DirGenerations, g2, "c0", 4, ResultOK), // another generation: no bind
			command(8, 9, OpCancel, "c0", errEBUSY),
			exit(10, 11, 1),
			command(12, 13, OpCancel, "c0", ResultOK),
		}, porcupine.Ok},
		{"a spawned process carries the launch ID before it opens", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			op(4, 5, Input{Op: OpSpawn, Clone: "c0", Seq: 2, Proc: 1}, Output{Result: ResultOK}),
			command(6, 7, OpCancel, "c0", errEBUSY),
			tombstone(8, 9, g1, ResultOK),
			bind(10, 11, 1, DirTombstones, g1, "c0", 2, errEPERM),
			command(12, 13, OpCancel, "c0", ResultOK),
		}, porcupine.Ok},
		{"cancel misses a process started while it runs", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			command(4, 20, OpCancel, "c0", ResultOK),
			client(1, op(5, 6, Input{Op: OpSpawn, Clone: "c0", Seq: 2, Proc: 1}, Output{Result: ResultOK})),
			client(2, op(7, 8, Input{Op: OpList, Dir: DirLeases, Group: AllGroups}, Output{Result: ResultOK, Names: []string{"c0"}})),
			client(1, bind(9, 10, 1, DirGenerations, g1, "c0", 2, ResultOK)),
		}, porcupine.Ok},
		{"cancel does not miss a process started before it", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			client(1, op(4, 5, Input{Op: OpSpawn, Clone: "c0", Seq: 2, Proc: 1}, Output{Result: ResultOK})),
			command(6, 20, OpCancel, "c0", ResultOK),
		}, porcupine.Illegal},
		{"pid N binds a reserved lease; exited, it stays listed until rm", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			bindPID(4, 5, 1, "c0", ResultOK),
			bindPID(6, 7, 2, "c0", errEBUSY),
			exit(8, 9, 1),
			op(10, 11, Input{Op: OpListLeases, Dir: DirGenerations, Gen: g1}, Output{Result: ResultOK, Names: []string{"c0"}}),
			bindPID(12, 13, 3, "c0", errEBUSY),
			command(14, 15, OpCancel, "c0", errEBUSY),
			release(16, 17, "c0", ResultOK),
		}, porcupine.Ok},
		{"pid N of a tombstoned generation's lease refused", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			tombstone(4, 5, g1, ResultOK),
			bindPID(6, 7, 1, "c0", errEPERM),
			command(8, 9, OpCancel, "c0", ResultOK),
		}, porcupine.Ok},
		{"pid N of a missing lease", []porcupine.Operation{
			bindPID(2, 3, 1, "c0", errENOENT),
		}, porcupine.Ok},
		{"exit drains a retiring generation", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			bind(4, 5, 1, DirGenerations, g1, "c0", 2, ResultOK),
			tombstone(6, 7, g1, ResultOK),
			transition(8, 9, OpRetire, DirTombstones, g1, false, ResultOK),
			status(10, 11, DirRetiring, g1, ResultOK, store.Retiring, false),
			exit(12, 20, 1),
			client(1, status(14, 15, DirRetiring, g1, ResultOK, store.Retiring, false)),
			status(21, 22, DirRetiring, g1, errENOENT, "", false),
			op(23, 24, Input{Op: OpList, Dir: DirLeases, Group: AllGroups}, Output{Result: ResultOK, Names: []string{"c0"}}),
			release(25, 26, "c0", ResultOK),
		}, porcupine.Ok},
		{"retiring generation still there after the exit of its last lease", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			bindPID(4, 5, 1, "c0", ResultOK),
			tombstone(6, 7, g1, ResultOK),
			transition(8, 9, OpRetire, DirTombstones, g1, false, ResultOK),
			exit(12, 20, 1),
			status(21, 22, DirRetiring, g1, ResultOK, store.Retiring, false),
		}, porcupine.Illegal},
		{"an exited lease does not keep a retirement pending", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			bindPID(4, 5, 1, "c0", ResultOK),
			exit(6, 7, 1),
			tombstone(8, 9, g1, ResultOK),
			transition(10, 11, OpRetire, DirTombstones, g1, false, ResultOK),
			status(12, 13, DirRetiring, g1, errENOENT, "", false),
		}, porcupine.Ok},
		{"retire of a published generation refused", []porcupine.Operation{
			transition(2, 3, OpRetire, DirGenerations, g1, false, errEPERM),
			transition(4, 5, OpRetire, DirGenerations, g1, true, errEPERM),
			list(6, 7, DirGenerations, "g000001"),
		}, porcupine.Ok},
		{"retired generation seen retiring while the rmdir runs, gone after", []porcupine.Operation{
			tombstone(2, 3, g1, ResultOK),
			transition(10, 20, OpRetire, DirTombstones, g1, false, ResultOK),
			client(1, status(12, 14, DirRetiring, g1, ResultOK, store.Retiring, false)),
			client(1, status(25, 26, DirRetiring, g1, errENOENT, "", false)),
			client(1, list(27, 28, DirRetiring)),
		}, porcupine.Ok},
		{"retired generation without leases still there after the rmdir returned", []porcupine.Operation{
			tombstone(2, 3, g1, ResultOK),
			transition(10, 20, OpRetire, DirTombstones, g1, false, ResultOK),
			client(1, status(25, 26, DirRetiring, g1, ResultOK, store.Retiring, false)),
		}, porcupine.Illegal},
		{"retiring generation stays until its last lease is released", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			tombstone(4, 5, g1, ResultOK),
			transition(6, 7, OpRetire, DirTombstones, g1, true, ResultOK),
			list(8, 9, DirRetiring, "g000001"),
			transition(10, 11, OpLift, DirRetiring, g1, false, errEPERM),
			acquire(12, 13, DirRetiring, g1, "c1", errEPERM),
			transition(14, 15, OpRetire, DirRetiring, g1, false, errEBUSY),
			transition(16, 17, OpRetire, DirRetiring, g1, true, ResultOK),
			release(18, 19, "c0", errEBUSY),
			command(18, 19, OpCancel, "c0", ResultOK),
			list(20, 21, DirRetiring),
			transition(22, 23, OpLift, DirRetiring, g1, true, errENOENT),
		}, porcupine.Ok},
		{"retiring generation lifted", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			tombstone(4, 5, g1, ResultOK),
			transition(6, 7, OpRetire, DirTombstones, g1, false, ResultOK),
			transition(8, 9, OpLift, DirRetiring, g1, true, ResultOK),
		}, porcupine.Illegal},
		{"rmdir of a drained retiring generation reported busy", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			tombstone(4, 5, g1, ResultOK),
			transition(6, 7, OpRetire, DirTombstones, g1, false, ResultOK),
			command(8, 9, OpCancel, "c0", ResultOK),
			transition(10, 11, OpRetire, DirRetiring, g1, false, errEBUSY),
		}, porcupine.Illegal},
		{"last lease released, generation still listed after", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", ResultOK),
			tombstone(4, 5, g1, ResultOK),
			transition(6, 7, OpRetire, DirTombstones, g1, false, ResultOK),
			command(14, 15, OpCancel, "c0", ResultOK),
			list(16, 17, DirRetiring, "g000001"),
		}, porcupine.Illegal},
		{"lifted generation grants leases again", []porcupine.Operation{
			tombstone(2, 3, g1, ResultOK),
			transition(4, 5, OpLift, DirTombstones, g1, false, ResultOK),
			acquire(6, 7, DirGenerations, g1, "c0", ResultOK),
			status(8, 9, DirGenerations, g1, ResultOK, store.Published, true),
		}, porcupine.Ok},
		{"ctl writes are idempotent and walk their directory", []porcupine.Operation{
			transition(2, 3, OpTombstone, DirGenerations, g1, true, ResultOK),
			transition(4, 5, OpTombstone, DirTombstones, g1, true, ResultOK),
			transition(6, 7, OpLift, DirGenerations, g1, true, errENOENT),
			list(8, 9, DirTombstones, "g000001"),
		}, porcupine.Ok},
		{"refused lookup changes nothing", []porcupine.Operation{
			acquire(2, 3, DirGenerations, g1, "c0", errESTALE),
			tombstone(4, 5, g1, errESTALE),
			acquire(6, 7, DirGenerations, g1, "c0", ResultOK),
		}, porcupine.Ok},
		{"listing shows a generation nobody published", []porcupine.Operation{
			list(2, 3, DirGenerations, "g000001", "g000003"),
		}, porcupine.Illegal},
		{"status disagrees with the state", []porcupine.Operation{
			status(2, 3, DirGenerations, g1, ResultOK, store.Tombstoned, false),
		}, porcupine.Illegal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			history := append(slices.Clone(setup), tc.ops...)
			got, info := porcupine.CheckOperationsVerbose(Model(), history, 10*time.Second)
			if got != tc.want {
				t.Errorf("check %s, want %s; history:\n%s", got, tc.want, FormatHistory(history))
			}
			if got == porcupine.Illegal && len(info.PartialLinearizations()) == 0 {
				t.Error("illegal history without partial linearizations to show")
			}
		})
	}
}

func TestPartition(t *testing.T) {
	in := func(o porcupine.Operation, group int, clone string) porcupine.Operation {
		i := o.Input.(Input)
		i.Group, i.Clone = group, clone
		o.Input = i
		return o
	}
	history := []porcupine.Operation{
		in(publish(0, 1, g1, true), 0, ""),
		in(publish(0, 1, g2, true), 1, ""),
		in(acquire(2, 3, DirGenerations, g1, "k0-c0", ResultOK), 0, "k0-c0"),
		in(acquire(2, 3, DirGenerations, g2, "k1-c0", ResultOK), 1, "k1-c0"),
		list(4, 5, DirGenerations, "g000001", "g000002", "g000003"),
		op(4, 5, Input{Op: OpList, Dir: DirLeases, Group: AllGroups}, Output{Result: ResultOK, Names: []string{"k0-c0", "k1-c0", "stray"}}),
	}
	parts := Partition(history)
	if len(parts) != 2 {
		t.Fatalf("%d partitions, want 2", len(parts))
	}
	want := []string{
		"publish: templatefs publish -> OK g000001 (eligible)\n" +
			"acquire: create generations/g000001/leases/k0-c0 -> OK seq 2\n" +
			"list: readdir generations/ -> OK [g000001 g000003]\n" +
			"list: readdir leases/ -> OK [k0-c0 stray]\n",
		"publish: templatefs publish -> OK g000002 (eligible)\n" +
			"acquire: create generations/g000002/leases/k1-c0 -> OK seq 2\n" +
			"list: readdir generations/ -> OK [g000002 g000003]\n" +
			"list: readdir leases/ -> OK [k1-c0 stray]\n",
	}
	for i, part := range parts {
		var got strings.Builder
		for _, o := range part {
			if g := o.Input.(Input).Group; g != i {
				t.Errorf("partition %d holds an operation of group %d", i, g)
			}
			got.WriteString(Describe(o.Input.(Input), o.Output.(Output)) + "\n")
		}
		if got.String() != want[i] {
			t.Errorf("partition %d:\n%s\nwant:\n%s", i, got.String(), want[i])
		}
	}
	// The whole history is illegal because of the names no group owns.
	if porcupine.CheckOperations(Model(), history) {
		t.Error("history listing g000003 and clone stray passed the check")
	}
}

func TestExplain(t *testing.T) {
	history := []porcupine.Operation{
		publish(0, 1, g1, true),
		tombstone(2, 3, g1, ResultOK),
		list(4, 5, DirTombstones, "g000001"),
		acquire(6, 7, DirGenerations, g1, "c0", ResultOK),
		list(8, 9, DirLeases, "c0"),
	}
	model := Model()
	res, info := porcupine.CheckOperationsVerbose(model, history, 10*time.Second)
	if res != porcupine.Illegal {
		t.Fatalf("check %s, want Illegal", res)
	}
	got := Explain(model, Partition(history)[0], info.PartialLinearizations()[0])
	for _, want := range []string{
		"linearized 3 of 5 operations",
		"{g000001=tombstoned |}",
		"client 0: acquire: create generations/g000001/leases/c0 -> OK",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("explanation lacks %q:\n%s", want, got)
		}
	}
}
