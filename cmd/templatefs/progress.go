package main

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"templatefs/store"
)

// progressView draws the progress of an operation's long steps on a
// terminal: one bar per step, with bytes done of the total, the rate and
// the time left. A nil *progressView draws nothing: commands are quiet
// when stderr is not a terminal.
type progressView struct {
	w     io.Writer
	label string
	bar   *progressbar.ProgressBar
}

// newProgressView returns a view on stderr if it is a terminal, else nil.
func newProgressView(stderr io.Writer) *progressView {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &progressView{w: stderr}
}

// step returns the store.Progress of the step named label, or nil for a
// nil view.
func (v *progressView) step(label string) store.Progress {
	if v == nil {
		return nil
	}
	return func(done, total int64) { v.update(label, done, total) }
}

// update shows done of total bytes of step label; a new label ends the
// previous step's bar and starts its own.
func (v *progressView) update(label string, done, total int64) {
	if v == nil {
		return
	}
	if v.bar == nil || v.label != label {
		v.finish()
		v.label = label
		v.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(v.w),
			progressbar.OptionSetDescription(label),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionShowTotalBytes(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { io.WriteString(v.w, "\n") }),
		)
	}
	v.bar.Set64(done)
}

// finish ends the current bar, if any.
func (v *progressView) finish() {
	if v == nil || v.bar == nil {
		return
	}
	if !v.bar.IsFinished() {
		v.bar.Exit()
		io.WriteString(v.w, "\n")
	}
	v.bar = nil
}
