package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"templatefs/store"
	"templatefs/store/templatekey"
)

// progressLog records the calls of a store.Progress.
type progressLog struct{ done, total []int64 }

func (p *progressLog) fn(done, total int64) {
	p.done = append(p.done, done)
	p.total = append(p.total, total)
}

// check fails the test unless done only grew, total never changed and
// the last call had done == total == want.
func (p *progressLog) check(t *testing.T, what string, want int64) {
	t.Helper()
	if len(p.done) == 0 {
		t.Fatalf("%s: no progress reported", what)
	}
	for i := range p.done {
		if p.total[i] != want || i > 0 && p.done[i] < p.done[i-1] {
			t.Fatalf("%s: progress call %d: %d of %d (before: %d); want growing bytes of %d", what, i, p.done[i], p.total[i], p.done[max(i-1, 0)], want)
		}
	}
	if last := p.done[len(p.done)-1]; last != want {
		t.Errorf("%s: last progress %d of %d; want %d", what, last, want, want)
	}
}

func artifactBytes(g store.Generation) int64 {
	var n int64
	for _, a := range g.Artifacts {
		n += a.Size
	}
	return n
}

// TestVerify: Verify re-hashes every artifact and finds nothing on a clean
// store; it names a flipped byte, a missing file and a file of another
// size, each as one problem, and reports the bytes hashed as progress.
// Nothing in the store changes.
func TestVerify(t *testing.T) {
	dir, st, _ := openStore(t)
	g1 := publish(t, st, makeCapture(t, 8<<20, 1))
	g2 := publish(t, st, makeCapture(t, 8<<20, 2))
	var p progressLog
	if problems, err := st.Verify(nil, p.fn); err != nil || len(problems) != 0 {
		t.Fatalf("Verify of a clean store: %v, %v", problems, err)
	}
	p.check(t, "Verify", artifactBytes(g1)+artifactBytes(g2))

	flipByte(t, dir, g1, g2)
	if err := os.Remove(filepath.Join(dir, store.PayloadDir, g2.ID.String(), "state.bin")); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(dir, store.PayloadDir, g2.ID.String(), "memory.bin")
	chmodWrite(t, mem, func() error { return os.Truncate(mem, 4096) })
	problems, err := st.Verify(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, pr := range problems {
		lines = append(lines, pr.String())
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"artifact-digest generation " + g1.ID.String() + ": state.bin has SHA-256",
		"artifact-missing generation " + g2.ID.String() + ": state.bin: no such file",
		"artifact-digest generation " + g2.ID.String() + ": memory.bin has SHA-256",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Verify of a damaged store:\n%s\nlacks %q", got, want)
		}
	}
	if len(problems) != 3 {
		t.Errorf("Verify found %d problems, want 3:\n%s", len(problems), got)
	}
	if problems, err := st.Verify([]store.GenerationID{g1.ID}, nil); err != nil || len(problems) != 1 || !strings.HasPrefix(problems[0].String(), "artifact-digest generation "+g1.ID.String()) {
		t.Errorf("Verify of %s alone: %v, %v; want its one problem", g1.ID, problems, err)
	}
	if _, err := st.Verify([]store.GenerationID{9}, nil); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "g000009") {
		t.Errorf("Verify of a generation not in the store: %v; want ErrNotFound naming it", err)
	}
}

// TestCheckDigestsProgress: Check with Digests reports the bytes it
// hashes; a problem Check would repair is marked Repairable also when it
// is not repaired.
func TestCheckDigestsProgress(t *testing.T) {
	dir, st, _ := openStore(t)
	g := publish(t, st, makeCapture(t, 8<<20, 1))
	var p progressLog
	if problems, err := st.Check(store.CheckOptions{Digests: true, Progress: p.fn}); err != nil || len(problems) != 0 {
		t.Fatalf("Check: %v, %v", problems, err)
	}
	p.check(t, "Check with Digests", artifactBytes(g))
	writeFile(t, filepath.Join(dir, store.StagingDir, "junk"))
	problems, err := st.Check(store.CheckOptions{})
	if err != nil || len(problems) != 1 || !problems[0].Repairable || problems[0].Repaired {
		t.Errorf("Check of a staging leftover: %+v, %v; want one Repairable problem, not repaired", problems, err)
	}
}

// TestPublishProgress: PublishWith reports the bytes it copies, holes
// included, up to the capture's total.
func TestPublishProgress(t *testing.T) {
	_, st, _ := openStore(t)
	class := templatekey.SampleClass()
	var p progressLog
	g, published, err := st.PublishWith(makeCapture(t, 8<<20, 1), &class, store.PublishOptions{Progress: p.fn})
	if err != nil || !published {
		t.Fatalf("PublishWith: %v, published %t", err, published)
	}
	p.check(t, "PublishWith", artifactBytes(g))
}

// TestInterrupt: Interrupt ends a publication's copy and a verify at
// their next block with ErrInterrupted; the refused publication leaves no
// generation and an empty staging/.
func TestInterrupt(t *testing.T) {
	dir, st, _ := openStore(t)
	g := publish(t, st, makeCapture(t, 8<<20, 1))
	class := templatekey.SampleClass()
	_, _, err := st.PublishWith(makeCapture(t, 8<<20, 2), &class, store.PublishOptions{Progress: func(done, total int64) {
		st.Interrupt() // after the first block
	}})
	if !errors.Is(err, store.ErrInterrupted) {
		t.Fatalf("PublishWith interrupted: %v, want ErrInterrupted", err)
	}
	if gens, err := st.Generations(); err != nil || len(gens) != 1 || gens[0].ID != g.ID {
		t.Errorf("generations after an interrupted publication: %v, %v; want only %s", gens, err, g.ID)
	}
	if left, err := os.ReadDir(filepath.Join(dir, store.StagingDir)); err != nil || len(left) != 0 {
		t.Errorf("staging/ after an interrupted publication: %v, %v; want empty", left, err)
	}
	if _, err := st.Verify(nil, nil); !errors.Is(err, store.ErrInterrupted) {
		t.Errorf("Verify after Interrupt: %v, want ErrInterrupted", err)
	}
}
