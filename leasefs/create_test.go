package leasefs

import (
	"errors"
	"testing"

	"templatefs/store"
)

// TestCreateAcknowledgedAtClose: a create of a new lease answers with the
// lease's node, attributes and record at once; the handle's attributes at
// open are those (no store read, which would wait for the commit); the
// close (Flush) returns once the lease is durable, and from then on it is
// listed and found. A second create of the name opens the committed
// lease, or is EEXIST with O_EXCL.
func TestCreateAcknowledgedAtClose(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	dir, name := fx.parent("generations/g000001/leases/n1")
	cr, err := fx.fs.Create(dir, name, OpenFlags{Write: true, Exclusive: true}, owner)
	if err != nil {
		t.Fatal(err)
	}
	if cr.Node.Kind() != KindLeaseFile || cr.Attr.Ino != cr.Node.Ino() || cr.Handle.Commands == nil || len(cr.Handle.Data) == 0 {
		t.Fatalf("created %+v: want a lease file node with its attributes, record and command stream", cr)
	}
	if a, err := fx.fs.OpenAttr(cr.Node, cr.Handle); err != nil || a != cr.Attr {
		t.Errorf("OpenAttr of the creating handle: %+v, %v; want the created attributes %+v", a, err, cr.Attr)
	}
	if err := cr.Handle.Commands.Flush(); err != nil {
		t.Fatalf("close of the creating handle: %v", err)
	}
	if err := cr.Handle.Commands.Flush(); err != nil {
		t.Errorf("second close (a duplicate descriptor): %v", err)
	}
	ls, err := fx.st.LeasesAfter("n0", 1) // a listing, which does not wait for commits
	if err != nil || len(ls) != 1 || ls[0].CloneID != name || ls[0].Seq != cr.Node.num {
		t.Errorf("leases after the close: %+v, %v; want %s with the created seq", ls, err, name)
	}
	again, err := fx.fs.Create(dir, name, OpenFlags{Write: true}, owner)
	if err != nil || again.Node != cr.Node || again.Handle.Commands == nil {
		t.Errorf("create of the committed lease again: %+v, %v; want it opened for writing", again, err)
	} else if err := again.Handle.Commands.Flush(); err != nil {
		t.Errorf("close of the retried create: %v", err)
	}
	if _, err := fx.fs.Create(dir, name, OpenFlags{Exclusive: true}, owner); !errors.Is(err, ErrExist) {
		t.Errorf("O_EXCL create of the committed lease: %v; want ErrExist", err)
	}
}

// TestCreateTruncateAcknowledgedAtOpen: with O_TRUNC or O_APPEND (shell
// redirections, whose close result shells ignore) the create itself waits
// for the commit: the lease is listed as soon as Create returns.
func TestCreateTruncateAcknowledgedAtOpen(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	for _, tc := range []struct {
		name string
		fl   OpenFlags
	}{
		{"t1", OpenFlags{Write: true, Truncate: true}},
		{"a1", OpenFlags{Write: true, Append: true}},
	} {
		dir, name := fx.parent("generations/g000001/leases/" + tc.name)
		if _, err := fx.fs.Create(dir, name, tc.fl, owner); err != nil {
			t.Fatal(err)
		}
		ls, err := fx.st.LeasesAfter(tc.name[:1], 1) // the listing does not wait for commits
		if err != nil || len(ls) != 1 || ls[0].CloneID != name || ls[0].State != store.Reserved {
			t.Errorf("%+v create returned, leases after it: %+v, %v; want %s committed", tc.fl, ls, err, name)
		}
	}
}
