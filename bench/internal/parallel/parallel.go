// Package parallel runs the bench's concurrent jobs: n numbered calls
// shared by several callers, timed.
package parallel

import (
	"sync"
	"sync/atomic"
	"time"
)

// Rate calls f(caller, i) for each i in [0, n) from callers goroutines at
// once (caller in [0, callers) says which goroutine calls), each taking
// the next i not yet taken, and returns calls per second over the whole
// run. The first error f returns stops every caller before its next call
// and is returned.
func Rate(callers, n int, f func(caller, i int) error) (float64, error) {
	var next atomic.Int64
	var stop atomic.Bool
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	for caller := range callers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && !stop.Load(); i = int(next.Add(1) - 1) {
				if err := f(caller, i); err != nil {
					once.Do(func() { first = err })
					stop.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
