package leasefs

import (
	"fmt"
	"slices"
	"testing"
)

// TestReadDirFrom: for every directory and page size, the pages of
// ReadDirFrom put together are ReadDir's listing, and a page shorter
// than asked is the last.
func TestReadDirFrom(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	for _, clone := range []string{"a0", "b7", "z9", "m3"} {
		fx.acquire(3, clone)
	}
	for p, dir := range fx.walkTree() {
		if !dir.IsDir() {
			continue
		}
		want, err := fx.fs.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2, 3, 100} {
			t.Run(fmt.Sprintf("%s/%d", p, n), func(t *testing.T) {
				var got []DirEntry
				after := ""
				for pages := 0; ; pages++ {
					page, err := fx.fs.ReadDirFrom(dir, after, n)
					if err != nil {
						t.Fatal(err)
					}
					if len(page) > n || pages > len(want)+1 {
						t.Fatalf("page of %d entries after %q, asked %d (page %d)", len(page), after, n, pages)
					}
					got = append(got, page...)
					if len(page) < n {
						break
					}
					after = page[len(page)-1].Name
				}
				if !slices.Equal(got, want) {
					t.Errorf("pages give %v, ReadDir %v", got, want)
				}
			})
		}
	}
}

// TestReadDirFromRemoved: a page after a name removed since the last page
// continues with the next name.
func TestReadDirFromRemoved(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	for _, clone := range []string{"a0", "b7", "m3"} {
		fx.acquire(3, clone)
	}
	if err := fx.st.CancelLease("b7"); err != nil {
		t.Fatal(err)
	}
	page, err := fx.fs.ReadDirFrom(fx.walk("generations/g000003/leases"), "b7", 10)
	if err != nil || len(page) != 1 || page[0].Name != "m3" {
		t.Errorf("page after released b7 = %v, %v; want [m3]", page, err)
	}
	if _, err := fx.fs.ReadDirFrom(fx.walk("leases"), "", 0); err == nil {
		t.Errorf("page size 0 accepted")
	}
}

// TestReadDirPlusFrom: each listed lease comes with the attributes Attr
// reports for it, and every other entry without any.
func TestReadDirPlusFrom(t *testing.T) {
	fx := newFixture(t, makeCaptures(t))
	fx.acquire(3, "a0")
	for p, dir := range fx.walkTree() {
		if !dir.IsDir() {
			continue
		}
		page, err := fx.fs.ReadDirPlusFrom(dir, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			switch {
			case e.Node.Kind() != KindLeaseFile:
				if e.Attr != nil {
					t.Errorf("%s/%s: %s listed with attributes", p, e.Name, e.Node)
				}
			case e.Attr == nil:
				t.Errorf("%s/%s: lease listed without attributes", p, e.Name)
			default:
				want, err := fx.fs.Attr(e.Node)
				if err != nil {
					t.Fatal(err)
				}
				if *e.Attr != want {
					t.Errorf("%s/%s: listed with %+v, Attr says %+v", p, e.Name, *e.Attr, want)
				}
			}
		}
	}
}
