// Package progress draws a progress bar on a terminal for the commands
// that read big inputs (convert, split): bytes done of the total, the rate
// and the time left, redrawn five times a second on a goroutine of the
// bar's own. Written to anything but a terminal, the bar draws nothing.
//
// Lines printed while the bar runs go between Pause and Resume, which
// clear the bar and hold its goroutine off. A nil *Bar does nothing, so a
// callback may use a bar that is started later.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Bar is a running progress bar.
type Bar struct {
	w     io.Writer
	total int64
	done  func() int64
	start time.Time

	mu      sync.Mutex
	drawn   bool
	quit    chan struct{}
	stopped sync.WaitGroup
}

// Start starts a bar on w for total bytes; done is asked (on the bar's
// goroutine) how many are done.
func Start(w io.Writer, total int64, done func() int64) *Bar {
	p := &Bar{w: w, total: total, done: done, start: time.Now()}
	if !isTerminal(w) {
		return p
	}
	p.quit = make(chan struct{})
	p.stopped.Add(1)
	go func() {
		defer p.stopped.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.mu.Lock()
				p.draw()
				p.mu.Unlock()
			}
		}
	}()
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (p *Bar) draw() {
	done := p.done()
	el := time.Since(p.start).Seconds()
	frac := 1.0
	if p.total > 0 {
		frac = min(float64(done)/float64(p.total), 1)
	}
	const width = 30
	fill := int(frac * width)
	rate := float64(done) / max(el, 1e-9)
	left := "?"
	if rate > 0 && done > 0 {
		left = formatDuration(time.Duration(float64(p.total-done) / rate * float64(time.Second)))
	}
	fmt.Fprintf(p.w, "\r[%s%s] %3.0f%% %s / %s  %s/s  %s left \x1b[K",
		strings.Repeat("=", fill), strings.Repeat(" ", width-fill), 100*frac,
		FormatBytes(done), FormatBytes(p.total), FormatBytes(int64(rate)), left)
	p.drawn = true
}

// Pause clears the bar so that a line can be printed; Resume lets it be
// drawn again.
func (p *Bar) Pause() {
	if p == nil || p.quit == nil {
		return
	}
	p.mu.Lock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// Resume ends a Pause.
func (p *Bar) Resume() {
	if p != nil && p.quit != nil {
		p.mu.Unlock()
	}
}

// Stop removes the bar for good. It is safe to call twice.
func (p *Bar) Stop() {
	if p == nil || p.quit == nil {
		return
	}
	close(p.quit)
	p.stopped.Wait()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	p.quit = nil
}

// FormatBytes writes a byte count for people: 512 B, 1.5 kB, 3.2 MB,
// 1.25 GB (decimal units).
func FormatBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

func formatDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
