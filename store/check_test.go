package store_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"templatefs/store"
	"templatefs/store/templatekey"
)

func gkey(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

// chmodWrite runs fn on path with write permission, then restores 0400.
func chmodWrite(t *testing.T, path string, fn func() error) {
	t.Helper()
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fn(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
}

func kinds(problems []store.Problem) []string {
	var out []string
	for _, p := range problems {
		out = append(out, p.Kind)
	}
	slices.Sort(out)
	return out
}

func TestCheckCleanStore(t *testing.T) {
	_, st, _ := openStore(t)
	g1 := publish(t, st, makeCapture(t, 16<<20, 1))
	g2 := publish(t, st, makeCapture(t, 16<<20, 2))
	for _, l := range []struct {
		g     store.Generation
		clone string
	}{{g1, "c1"}, {g2, "c2"}} {
		if _, _, err := st.AcquireLease(l.g.ID, l.clone); err != nil {
			t.Fatal(err)
		}
	}
	tombstone(t, st, g2)
	if _, err := st.Retire(g2.ID, 0); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []store.CheckOptions{{}, {Digests: true}, {Digests: true, Repair: true}} {
		if problems, err := st.Check(opts); err != nil || len(problems) != 0 {
			t.Errorf("Check(%+v) = %v, %v; want no problems", opts, problems, err)
		}
	}
}

// corruption spoils a store holding g1 (published, lease "c1") and g2
// (tombstoned, no lease), both under one key.
type corruption struct {
	name       string
	index      func(tx *bolt.Tx, key []byte) error                     // on the closed store
	files      func(t *testing.T, dir string, g1, g2 store.Generation) // on the open store
	digests    bool
	want       []string // problem kinds, sorted
	repairable bool
}

var corruptions = []corruption{
	{name: "tracked lease not listed", index: func(tx *bolt.Tx, key []byte) error {
		l, err := store.GetLeaseRow(tx, "c1")
		if err != nil {
			return err
		}
		l.State, l.Process = store.Bound, &store.ProcessIdentity{PID: 1, StartTime: 1, BootID: strings.Repeat("ab", 16)}
		if err := store.PutLeaseRow(tx, l); err != nil {
			return err
		}
		return tx.Bucket([]byte("tracked_leases")).Delete([]byte("c1"))
	}, want: []string{store.ProblemLeaseIndexMissing}, repairable: true},
	{name: "stale tracked row", index: func(tx *bolt.Tx, key []byte) error {
		return tx.Bucket([]byte("tracked_leases")).Put([]byte("c1"), nil) // c1 is reserved
	}, want: []string{store.ProblemLeaseIndexStale}, repairable: true},
	{name: "lease index row missing", index: func(tx *bolt.Tx, key []byte) error {
		return tx.Bucket([]byte("generation_leases")).Bucket(gkey(1)).Delete([]byte("c1"))
	}, want: []string{store.ProblemLeaseIndexMissing}, repairable: true},
	{name: "stale lease index row", index: func(tx *bolt.Tx, key []byte) error {
		gl, err := tx.Bucket([]byte("generation_leases")).CreateBucketIfNotExists(gkey(2))
		if err != nil {
			return err
		}
		return gl.Put([]byte("nobody"), nil)
	}, want: []string{store.ProblemLeaseIndexStale}, repairable: true},
	{name: "empty lease bucket of a missing generation", index: func(tx *bolt.Tx, key []byte) error {
		_, err := tx.Bucket([]byte("generation_leases")).CreateBucket(gkey(99))
		return err
	}, want: []string{store.ProblemLeaseIndexStale}, repairable: true},
	{name: "lease on a missing generation", index: func(tx *bolt.Tx, key []byte) error {
		if err := store.PutLeaseRow(tx, store.Lease{CloneID: "ghost", Generation: 99, KeyID: string(key), Seq: 7, State: store.Reserved}); err != nil {
			return err
		}
		gl, err := tx.Bucket([]byte("generation_leases")).CreateBucket(gkey(99))
		if err != nil {
			return err
		}
		return gl.Put([]byte("ghost"), nil)
	}, want: []string{store.ProblemLeaseGeneration}},
	{name: "key index row missing", index: func(tx *bolt.Tx, key []byte) error {
		return tx.Bucket([]byte("key_generations")).Bucket(key).Delete(gkey(2))
	}, want: []string{store.ProblemKeyIndexMissing}, repairable: true},
	{name: "stale key index row", index: func(tx *bolt.Tx, key []byte) error {
		return tx.Bucket([]byte("key_generations")).Bucket(key).Put(gkey(99), nil)
	}, want: []string{store.ProblemKeyIndexStale}, repairable: true},
	{name: "key record missing", index: func(tx *bolt.Tx, key []byte) error {
		return tx.Bucket([]byte("keys")).Delete(key)
	}, want: []string{store.ProblemKeyMissing, store.ProblemKeyMissing, store.ProblemKeyMissing}},
	{name: "misfiled generation record", index: func(tx *bolt.Tx, key []byte) error {
		b := tx.Bucket([]byte("generations"))
		return b.Put(gkey(99), b.Get(gkey(1)))
	}, want: []string{store.ProblemIndex}},
	{name: "artifact missing", files: func(t *testing.T, dir string, g1, g2 store.Generation) {
		if err := os.Remove(filepath.Join(dir, store.PayloadDir, g1.ID.String(), "state.bin")); err != nil {
			t.Fatal(err)
		}
	}, want: []string{store.ProblemArtifactMissing}},
	{name: "artifact size", files: func(t *testing.T, dir string, g1, g2 store.Generation) {
		p := filepath.Join(dir, store.PayloadDir, g1.ID.String(), "memory.bin")
		chmodWrite(t, p, func() error { return os.Truncate(p, 4096) })
	}, want: []string{store.ProblemArtifactSize}},
	{name: "artifact digest, not looked at", files: flipByte, want: nil, repairable: true},
	{name: "artifact digest", files: flipByte, digests: true, want: []string{store.ProblemArtifactDigest}},
	{name: "unexpected artifact", files: func(t *testing.T, dir string, g1, g2 store.Generation) {
		writeFile(t, filepath.Join(dir, store.PayloadDir, g2.ID.String(), "notes.txt"))
	}, want: []string{store.ProblemArtifactUnexpected}, repairable: true},
	{name: "payload missing", files: func(t *testing.T, dir string, g1, g2 store.Generation) {
		if err := os.RemoveAll(filepath.Join(dir, store.PayloadDir, g2.ID.String())); err != nil {
			t.Fatal(err)
		}
	}, want: []string{store.ProblemPayloadMissing}},
	{name: "orphaned payload", index: func(tx *bolt.Tx, key []byte) error {
		return tx.Bucket([]byte("generations")).SetSequence(99) // IDs up to 99 were reserved
	}, files: func(t *testing.T, dir string, g1, g2 store.Generation) {
		writeFile(t, filepath.Join(dir, store.PayloadDir, "g000099", "state.bin"))
		writeFile(t, filepath.Join(dir, store.PayloadDir, "g000098", "state.bin"))
	}, want: []string{store.ProblemPayloadOrphaned, store.ProblemPayloadOrphaned}, repairable: true},
	{name: "payload ahead of the index", files: func(t *testing.T, dir string, g1, g2 store.Generation) {
		writeFile(t, filepath.Join(dir, store.PayloadDir, "g000003", "state.bin"))
		writeFile(t, filepath.Join(dir, store.PayloadDir, "junk", "x"))
	}, want: []string{store.ProblemPayloadAhead, store.ProblemPayloadAhead}},
	{name: "staging leftover", files: func(t *testing.T, dir string, g1, g2 store.Generation) {
		writeFile(t, filepath.Join(dir, store.StagingDir, "g000003", "memory.bin"))
	}, want: []string{store.ProblemStagingLeftover}, repairable: true},
}

func flipByte(t *testing.T, dir string, g1, g2 store.Generation) {
	p := filepath.Join(dir, store.PayloadDir, g1.ID.String(), "state.bin")
	chmodWrite(t, p, func() error {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, 100); err != nil {
			return err
		}
		b[0] ^= 0xff
		_, err = f.WriteAt(b, 100)
		return err
	})
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCheckFindsAndRepairs(t *testing.T) {
	for _, tt := range corruptions {
		t.Run(tt.name, func(t *testing.T) {
			dir, st, host := openStore(t)
			g1 := publish(t, st, makeCapture(t, 16<<20, 1))
			g2 := publish(t, st, makeCapture(t, 16<<20, 2))
			if _, _, err := st.AcquireLease(g1.ID, "c1"); err != nil {
				t.Fatal(err)
			}
			tombstone(t, st, g2)
			if tt.index != nil {
				st.Close()
				editIndex(t, dir, func(tx *bolt.Tx) error { return tt.index(tx, []byte(g1.KeyID)) })
				st = reopen(t, dir, host)
			}
			if tt.files != nil {
				tt.files(t, dir, g1, g2)
			}
			opts := store.CheckOptions{Digests: tt.digests}
			problems, err := st.Check(opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(problems); !slices.Equal(got, tt.want) {
				t.Fatalf("Check found %q, want kinds %q", problems, tt.want)
			}
			for _, p := range problems {
				line := p.String()
				if !strings.HasPrefix(line, p.Kind+" "+p.Subject+": ") || strings.Contains(line, "\n") || p.Detail == "" {
					t.Errorf("problem line %q: want one line, kind, subject, detail", line)
				}
				switch p.Kind {
				case store.ProblemArtifactMissing, store.ProblemArtifactSize, store.ProblemArtifactDigest, store.ProblemPayloadMissing:
					if !strings.HasSuffix(line, "; tombstone and retire the generation, then publish its capture again or restore the store from a backup") {
						t.Errorf("problem line %q: want it to say what to do with the damaged generation", line)
					}
				}
			}
			opts.Repair = true
			repaired, err := st.Check(opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := kinds(repaired); !slices.Equal(got, tt.want) {
				t.Errorf("Check with Repair found %q, want kinds %q", repaired, tt.want)
			}
			for _, p := range repaired {
				if p.Repaired != tt.repairable {
					t.Errorf("%s: repaired %v, want %v", p, p.Repaired, tt.repairable)
				}
			}
			opts.Repair = false
			after, err := st.Check(opts)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if tt.repairable {
				want = nil
			}
			if got := kinds(after); !slices.Equal(got, want) {
				t.Errorf("Check after repair found %q, want kinds %q", after, want)
			}
		})
	}
}

// TestCheckDuringChanges runs Check with Repair while generations are
// published, leased, released and retired: it must not take a
// publication or retirement in progress for damage.
func TestCheckDuringChanges(t *testing.T) {
	_, st, _ := openStore(t)
	captures := []string{makeCapture(t, 16<<20, 1), makeCapture(t, 16<<20, 2)}
	done := make(chan error)
	go func() {
		class := templatekey.SampleClass()
		for i := range 6 {
			g, err := st.Publish(captures[i%2], &class)
			if err == nil {
				_, _, err = st.AcquireLease(g.ID, "c")
			}
			if err == nil {
				_, err = st.Tombstone(g.ID, 0)
			}
			if err == nil {
				_, err = st.Retire(g.ID, 0)
			}
			if err == nil {
				err = st.CancelLease("c")
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for checks := 0; ; checks++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if gens, err := st.Generations(); err != nil || len(gens) != 0 {
				t.Errorf("generations left: %v, %v", gens, err)
			}
			t.Logf("%d checks ran", checks)
			return
		default:
		}
		problems, err := st.Check(store.CheckOptions{Digests: true, Repair: true})
		if err != nil {
			t.Fatal(err)
		}
		// A release commits before it finishes the retirement it drained;
		// Check may see that moment and finish the retirement itself.
		for _, p := range problems {
			if p.Kind != store.ProblemRetirementPending || !p.Repaired {
				t.Fatalf("Check during changes = %v; want nothing but repaired pending retirements", problems)
			}
		}
	}
}
