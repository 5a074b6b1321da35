//go:build !clockskew

package hostclock

// Tagged reports whether this build honours SkewEnv (the clockskew tag).
const Tagged = false

const skew = 0
