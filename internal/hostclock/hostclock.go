// Package hostclock is the one wall clock templatefs reads: the store's
// record times, the host facts eligibility is decided on, the sample
// captures the CLI writes, and every test fixture that meets the real
// clock all take "now" from Now, so code and tests always agree on it.
//
// Built with the tag clockskew (tests only, never a release), Now is moved
// by the duration in TEMPLATEFS_CLOCK_SKEW (for example 87600h). CI runs
// the store and tree tests a second time with the clock years ahead, so a
// fixture dated by the calendar instead of by Now fails the day it is
// written, not on the day the calendar reaches it.
package hostclock

import "time"

// SkewEnv names the environment variable that moves Now in builds with the
// clockskew tag; other builds ignore it.
const SkewEnv = "TEMPLATEFS_CLOCK_SKEW"

// Now returns the host's wall-clock time, moved by Skew.
func Now() time.Time { return time.Now().Add(skew) }

// Skew returns how far Now is moved from the real clock: zero except in a
// clockskew build with TEMPLATEFS_CLOCK_SKEW set.
func Skew() time.Duration { return skew }
