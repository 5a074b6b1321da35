//go:build clockskew

package hostclock

import (
	"fmt"
	"os"
	"time"
)

// Tagged reports whether this build honours SkewEnv (the clockskew tag).
const Tagged = true

// skew is read once at start: a malformed value stops the process at once
// (exit 2) rather than running the suite on the real clock unnoticed.
var skew = func() time.Duration {
	v := os.Getenv(SkewEnv)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: want a Go duration such as 87600h: %v\n", SkewEnv, v, err)
		os.Exit(2)
	}
	return d
}()
