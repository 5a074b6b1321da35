//go:build linux

package conformance

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"templatefs/leasefs"
)

// The behaviour table: what each operation on the tree does, as one list
// of cases run three ways (rclone's vfstest is the model): in-process
// against leasefs (TestBehaviourInProcess), and through the kernel on
// every FUSE backend (case Behaviour of Run: go-fuse in package fs,
// cgofuse in winfsp). A case is a list of steps on a fresh env (g000001 to
// g000003 published, lease c1 reserved on g000001), each with the errno
// it must give and what its output must and must not contain. Only
// outcomes leasefs decides belong here; what a kernel adds (caching,
// mmap, tools) stays in the mount-only cases.
var behaviours = []behaviour{
	{"RootLists", []step{
		{op: doList("."), want: "OK", has: "generations incoming keys leases retiring store store.db tombstones", lacks: "events"},
		{op: doStat("events"), want: "OK", has: "-r--r--r-- 1"},
	}},
	{"GenerationLists", []step{
		{op: doList("generations"), want: "OK", has: "g000001 g000002 g000003"},
		{op: doList("generations/g000001"), want: "OK", has: leasefs.SumsFileName + " ctl leases manifest payload status"},
		{op: doStat("generations/g000001"), want: "OK", has: "dr-xr-xr-x 4"},
		{op: doRead("generations/g000001/" + leasefs.SumsFileName), want: "OK", has: "  payload/memory.bin\n"},
	}},
	{"UnknownNames", []step{
		{op: doStat("generations/g000009"), want: "ENOENT"},
		{op: doStat("generations/gx"), want: "ENOENT"},
		{op: doStat("tombstones/g000001"), want: "ENOENT"},
		{op: doStat("leases/nobody"), want: "ENOENT"},
		{op: doStat("store/x"), want: "ENOTDIR"},
		{op: doRead("generations"), want: "EISDIR"},
	}},
	{"LeaseNames", []step{
		{op: doStat("leases/c1"), want: "OK", has: "-rw-r--r-- 3"},
		{op: doSameIno("leases/c1", "generations/g000001/leases/c1"), want: "OK", has: "same"},
		{op: doRead("leases/c1"), want: "OK", has: `"state":"reserved"`},
	}},
	{"Acquire", []step{
		{op: doCreate("generations/g000002/leases/n1"), want: "OK"},
		{op: doRead("leases/n1"), want: "OK", has: `"store_generation":"g000002"`},
		{op: doList("generations/g000002/leases"), want: "OK", has: "n1"},
		{op: doCreate("generations/g000002/leases/n1"), want: "EEXIST"},
		{op: doCreate("generations/g000002/leases/c1"), want: "EBUSY"},
		{op: doCreate("generations/g000002/leases/.x"), want: "EINVAL"},
	}},
	{"CreateElsewhere", []step{
		{op: doCreate("generations/g000001/x"), want: "EPERM"},
		{op: doCreate("leases/n2"), want: "EPERM"},
		{op: doCreate("x"), want: "EPERM"},
	}},
	{"ReservedLease", []step{
		{op: doRemove("leases/c1"), want: "EBUSY"},
		{op: doWrite("leases/c1", "bogus\n"), want: "EINVAL"},
		{op: doWrite("leases/c1", "cancel\n"), want: "OK"},
		{op: doStat("leases/c1"), want: "ENOENT"},
		{op: doRemove("generations/g000001/status"), want: "EPERM"},
	}},
	{"TombstoneAndLift", []step{
		{op: doRename("generations/g000002", "tombstones/g000002"), want: "OK"},
		{op: doList("tombstones"), want: "OK", has: "g000002"},
		{op: doList("generations"), want: "OK", lacks: "g000002"},
		{op: doCreate("tombstones/g000002/leases/n1"), want: "EPERM"},
		{op: doRmdir("generations/g000001"), want: "EPERM"},
		{op: doRename("tombstones/g000002", "generations/g000002"), want: "OK"},
		{op: doList("generations"), want: "OK", has: "g000001 g000002 g000003"},
	}},
	{"CtlCommands", []step{
		{op: doWrite("generations/g000003/ctl", "bogus\n"), want: "EINVAL"},
		{op: doWrite("generations/g000003/ctl", "tombstone\n"), want: "OK"},
		{op: doStat("generations/g000003"), want: "ENOENT"},
		{op: doStat("tombstones/g000003"), want: "OK"},
		{op: doWrite("tombstones/g000003/ctl", "retire\n"), want: "OK"},
		{op: doList("retiring"), want: "OK", lacks: "g000003"},
		{op: doStat("tombstones/g000003"), want: "ENOENT"},
	}},
	{"RefusedRenames", []step{
		{op: doRename("generations/g000001", "generations/g000009"), want: "EPERM"},
		{op: doRename("leases/c1", "leases/c2"), want: "EPERM"},
		{op: doRename("retiring", "x"), want: "EPERM"},
	}},
	{"ReadOnlyNodes", []step{
		{op: doWrite("generations/g000001/payload/state.bin", "x"), want: "EROFS"},
		{op: doWrite("store", "x"), want: "EROFS"},
		{op: doWrite("generations/g000001/"+leasefs.SumsFileName, "x"), want: "EROFS"},
		{op: doChmod("generations/g000001/payload/state.bin"), want: "EROFS"},
		{op: doChmod("leases/c1"), want: "EPERM"},
		{op: doRmdir("keys"), want: "EPERM"},
	}},
	{"Incoming", []step{
		{op: doMkdir("generations/x"), want: "EPERM"},
		{op: doMkdir("incoming/cap1"), want: "OK"},
		{op: doList("incoming/cap1"), want: "OK", has: "ctl status"},
		{op: doRead("incoming/cap1/status"), want: "OK", has: "open\n"},
		{op: doMkdir("incoming/cap1"), want: "EEXIST"},
		{op: doMkdir("incoming/.x"), want: "EINVAL"},
		{op: doRmdir("incoming/cap1"), want: "OK"},
		{op: doList("incoming"), want: "OK", lacks: "cap1"},
	}},
}

// behaviour is one case of the behaviour table.
type behaviour struct {
	name  string
	steps []step
}

// step is one operation of a case: the errno name it must give ("OK"),
// and text its output must (has) and must not (lacks) contain.
type step struct {
	op         op
	want       string
	has, lacks string
}

// op is an operation on a client, with its description for messages.
type op struct {
	desc string
	do   func(c client) (string, error)
}

// client is the tree as a case sees it: through the kernel (mountClient)
// or leasefs itself (lfsClient). Paths are relative to the root. Each
// returns what it read, if anything, and its error.
type client interface {
	read(rel string) (string, error)   // open read-only, read to EOF
	write(rel, data string) error      // open O_WRONLY|O_TRUNC, write, close: `echo data > rel`
	create(rel string) error           // open O_CREAT|O_EXCL|O_WRONLY, close: a new lease
	list(rel string) ([]string, error) // the names of a directory, sorted
	stat(rel string) (mode string, nlink uint32, ino uint64, err error)
	remove(rel string) error            // unlink(2)
	rmdir(rel string) error             // rmdir(2)
	mkdir(rel string) error             // mkdir(2)
	rename(oldRel, newRel string) error // rename(2), flags 0
	chmod(rel string) error             // chmod(2) to 0600
}

func doRead(rel string) op {
	return op{"cat " + rel, func(c client) (string, error) { return c.read(rel) }}
}

func doWrite(rel, data string) op {
	return op{fmt.Sprintf("echo %q > %s", data, rel), func(c client) (string, error) { return "", c.write(rel, data) }}
}

func doCreate(rel string) op {
	return op{"create " + rel, func(c client) (string, error) { return "", c.create(rel) }}
}

func doList(rel string) op {
	return op{"ls " + rel, func(c client) (string, error) {
		names, err := c.list(rel)
		return strings.Join(names, " "), err
	}}
}

func doStat(rel string) op {
	return op{"stat " + rel, func(c client) (string, error) {
		mode, nlink, _, err := c.stat(rel)
		return fmt.Sprintf("%s %d", mode, nlink), err
	}}
}

func doSameIno(a, b string) op {
	return op{"stat " + a + " " + b, func(c client) (string, error) {
		_, _, ia, err := c.stat(a)
		if err != nil {
			return "", err
		}
		_, _, ib, err := c.stat(b)
		if ia != ib {
			return fmt.Sprintf("differ: %#x, %#x", ia, ib), err
		}
		return "same", err
	}}
}

func doRemove(rel string) op {
	return op{"rm " + rel, func(c client) (string, error) { return "", c.remove(rel) }}
}

func doRmdir(rel string) op {
	return op{"rmdir " + rel, func(c client) (string, error) { return "", c.rmdir(rel) }}
}

func doMkdir(rel string) op {
	return op{"mkdir " + rel, func(c client) (string, error) { return "", c.mkdir(rel) }}
}

func doRename(oldRel, newRel string) op {
	return op{"mv " + oldRel + " " + newRel, func(c client) (string, error) { return "", c.rename(oldRel, newRel) }}
}

func doChmod(rel string) op {
	return op{"chmod 600 " + rel, func(c client) (string, error) { return "", c.chmod(rel) }}
}

// runBehaviours runs every case of the table as a subtest, each on the
// client newClient returns for its own fresh env.
func runBehaviours(t *testing.T, newClient func(t *testing.T) client) {
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) {
			c := newClient(t)
			for i, s := range b.steps {
				out, err := s.op.do(c)
				if got := errnoOfStep(err); got != s.want {
					t.Errorf("step %d, %s: %s (%v), want %s", i+1, s.op.desc, got, err, s.want)
					continue
				}
				if !strings.Contains(out, s.has) || s.lacks != "" && strings.Contains(out, s.lacks) {
					t.Errorf("step %d, %s: got %q, want it to contain %q and not %q", i+1, s.op.desc, out, s.has, s.lacks)
				}
			}
		})
	}
}

// testBehaviour runs the behaviour table through b's mount.
func testBehaviour(t *testing.T, b Backend) {
	runBehaviours(t, func(t *testing.T) client { return mountClient{newEnv(t, b)} })
}

// errnoOfStep names the errno err carries: a syscall.Errno from the
// kernel, else the leasefs.Errno of a leasefs error; "OK" for nil.
func errnoOfStep(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "OK"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return leasefs.ToErrno(err).String()
}
