package jfrhttp

import (
	"sync"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
)

// Bounds of the chunks remembered for skipping duplicates.
const (
	// chunksPerHost is how many chunks are remembered per host: a
	// recording of 250 MB (the JDK's default maxsize) cut into chunks
	// by a dump every few seconds holds a few hundred.
	chunksPerHost = 1024
	// dedupeHosts is how many hosts are remembered; the one heard from
	// least recently is forgotten first.
	dedupeHosts = 256
)

// chunkID identifies a finished chunk: a JVM writes each chunk once, and
// every recording file that holds it (each jcmd JFR.dump of a running
// recording copies the chunks written so far) holds the same header.
type chunkID struct{ start, ticks, size, duration int64 }

func idOf(h codec.Header) chunkID {
	return chunkID{h.StartNanos, h.StartTicks, h.ChunkSize, h.DurationNanos}
}

// seenChunks remembers, per host, the finished chunks of earlier uploads
// whose events were handed on, so that a chunk sent again (a loop of
// jcmd JFR.dump, a client that resends a recording) is not handed on
// twice. At most chunksPerHost chunks (the oldest go first) of
// dedupeHosts hosts: about 100 KB a host. Safe for concurrent uploads.
type seenChunks struct {
	mu    sync.Mutex
	hosts map[string]*hostChunks
	tick  int64
}

type hostChunks struct {
	ids  map[chunkID]struct{}
	ring []chunkID // in claim order; next overwrites the oldest when full
	next int
	used int64
}

// claim reports whether host's chunk h is new, and if so remembers it (an
// upload that claims a chunk hands its events on, or releases it). A
// chunk still being written (a live chunk's header) is always new.
func (s *seenChunks) claim(host string, h codec.Header) bool {
	if !h.Finished() {
		return true
	}
	id := idOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick++
	hc := s.hosts[host]
	if hc == nil {
		if s.hosts == nil {
			s.hosts = map[string]*hostChunks{}
		}
		if len(s.hosts) >= dedupeHosts {
			s.forgetOldest()
		}
		hc = &hostChunks{ids: map[chunkID]struct{}{}}
		s.hosts[host] = hc
	}
	hc.used = s.tick
	if _, ok := hc.ids[id]; ok {
		return false
	}
	if len(hc.ring) < chunksPerHost {
		hc.ring = append(hc.ring, id)
	} else {
		delete(hc.ids, hc.ring[hc.next])
		hc.ring[hc.next] = id
		hc.next = (hc.next + 1) % chunksPerHost
	}
	hc.ids[id] = struct{}{}
	return true
}

// release forgets a chunk claimed by an upload that failed before it had
// handed all its events on, so that the client's next attempt is read.
func (s *seenChunks) release(host string, h codec.Header) {
	if !h.Finished() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if hc := s.hosts[host]; hc != nil {
		delete(hc.ids, idOf(h))
	}
}

// forgetOldest forgets the host heard from least recently. s.mu is held.
func (s *seenChunks) forgetOldest() {
	oldest, at := "", int64(0)
	for name, hc := range s.hosts {
		if oldest == "" || hc.used < at {
			oldest, at = name, hc.used
		}
	}
	delete(s.hosts, oldest)
}
