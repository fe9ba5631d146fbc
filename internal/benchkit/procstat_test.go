package benchkit

import (
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// pid (comm with a space) state ppid … utime=250 stime=50 (ticks)
	stat := "4711 (otelcol bench) S 1 4711 4711 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	got, err := parseStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Errorf("cpu %v, want %v", got, want)
	}
	if _, err := parseStat("garbage"); err == nil {
		t.Error("no error for garbage")
	}
}
