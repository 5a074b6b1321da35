package concurrency

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Recorder collects a history from concurrent clients. Times are
// nanoseconds since NewRecorder, from the monotonic clock. It is safe for
// concurrent use.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

// NewRecorder returns an empty Recorder whose clock starts now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

func (r *Recorder) now() int64 { return int64(time.Since(r.start)) }

// Do performs one operation of client: it sets in.Call to the time before
// calling f, and the output's Return to the time after (at least one
// nanosecond later), records both and returns the output.
func (r *Recorder) Do(client int, in Input, f func(Input) Output) Output {
	in.Call = r.now()
	out := f(in)
	out.Return = max(r.now(), in.Call+1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: in.Call, Output: out, Return: out.Return})
	return out
}

// History returns a copy of the operations recorded so far, in the order
// they returned.
func (r *Recorder) History() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// FormatHistory renders operations one per line, by call time: call and
// return in milliseconds, client, group and Describe.
func FormatHistory(ops []porcupine.Operation) string {
	ops = slices.Clone(ops)
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	var b strings.Builder
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		fmt.Fprintf(&b, "%10.3fms %10.3fms client %2d group %2d  %s\n",
			float64(op.Call)/1e6, float64(op.Return)/1e6, op.ClientId, in.Group, Describe(in, out))
	}
	return b.String()
}

// Explain says where a partition without a linearization got stuck: the
// longest prefix porcupine linearized (partials is that partition's
// LinearizationInfo.PartialLinearizations entry, indexes into part), the
// model's states after it, and the first operation to return that no
// order of the operations before it explains.
func Explain(model porcupine.Model, part []porcupine.Operation, partials [][]int) string {
	var longest []int
	for _, p := range partials {
		if len(p) > len(longest) {
			longest = p
		}
	}
	st := model.Init()
	done := make([]bool, len(part))
	for _, i := range longest {
		_, st = model.Step(st, part[i].Input, part[i].Output)
		done[i] = true
	}
	stuck := -1
	for i, op := range part {
		if !done[i] && (stuck < 0 || op.Return < part[stuck].Return) {
			stuck = i
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "linearized %d of %d operations; model state then: %s\n", len(longest), len(part), model.DescribeState(st))
	if stuck >= 0 {
		op := part[stuck]
		fmt.Fprintf(&b, "no order explains the operation returning first after that: %.3fms %.3fms client %d: %s\n",
			float64(op.Call)/1e6, float64(op.Return)/1e6, op.ClientId, Describe(op.Input.(Input), op.Output.(Output)))
	}
	return b.String()
}
