//go:build linux

package concurrency

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"templatefs/store"
)

// leaseInfo is what a client read of a lease it created: the lease's
// sequence number and launch ID, and its generation. OpBind (a process
// carrying the launch ID opening a payload) is in the model
// (model_test.go) but not yet driven through the mount here: the daemon
// serves in this process, and a client forking an opener while the
// daemon scans /proc for a cancel can deadlock on the exec (see
// leasefs.Commands.run); an out-of-process daemon (tests/harness) is the
// way to drive it.
type leaseInfo struct {
	Seq    uint64 `json:"seq"`
	Launch string `json:"launch_id"`
	gen    store.GenerationID
}

// leases are the last lease created of each clone ID, as its creator read it.
type leases struct {
	mu sync.Mutex
	m  map[string]leaseInfo
}

func (o *leases) created(clone string, l leaseInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m[clone] = l
}

// acquire is OpAcquire: an exclusive create, read back for the lease's
// sequence number and launch ID.
func (e *env) acquire(in Input, path string) Output {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return Output{Result: mountResult(err)}
	}
	data, rerr := io.ReadAll(f)
	cerr := f.Close()
	var l leaseInfo
	switch {
	case rerr != nil:
		return Output{Result: "error: read the created lease: " + rerr.Error()}
	case cerr != nil:
		return Output{Result: mountResult(cerr)}
	case json.Unmarshal(data, &l) != nil || l.Seq == 0:
		return Output{Result: fmt.Sprintf("error: created lease reads %q", data)}
	}
	l.gen = in.Gen
	e.leases.created(in.Clone, l)
	return Output{Result: ResultOK, Seq: l.Seq}
}
