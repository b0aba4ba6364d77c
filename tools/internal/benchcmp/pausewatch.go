package benchcmp

import "time"

// A pause of the whole machine (the host not running this virtual machine
// for a while) lands in whichever run it meets, of either system: one
// synchronous write of two seconds' run then takes a second or more, and
// halves the run's throughput. A sleeper in the harness tells such a pause
// from the systems' own slowness: it wakes every pauseTick, and on two
// busy cores the scheduler lets it run within milliseconds, so only a
// pause of the machine (or of this process) makes it late by much more.

// pauseTick is how often the sleeper wakes: about a hundred wake-ups a
// second, a fraction of a percent of one core.
const pauseTick = 10 * time.Millisecond

// machinePauseLimit is how late the sleeper may wake before the run it
// watched is taken as one the machine paused in, and done again.
const machinePauseLimit = 250 * time.Millisecond

// pauseRedos bounds the runs of one shape done again for a pause, so a
// machine that keeps pausing still finishes (its figures then say so).
const pauseRedos = 2

// watchPauses starts the sleeper; the function it returns stops it and
// says how late, at worst, it woke meanwhile. Tests replace it.
var watchPauses = func() (stop func() time.Duration) {
	quit := make(chan struct{})
	worst := make(chan time.Duration, 1)
	go func() {
		var late time.Duration
		t := time.NewTimer(pauseTick)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-quit:
				worst <- max(late, time.Since(last)-pauseTick)
				return
			case now := <-t.C:
				late = max(late, now.Sub(last)-pauseTick)
				// From when the timer fired: a sleeper woken late by the
				// scheduler counts that lateness in the next tick too.
				last = now
				t.Reset(pauseTick)
			}
		}
	}()
	return func() time.Duration {
		close(quit)
		return <-worst
	}
}
