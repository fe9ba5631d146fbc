package block

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Meta is a block's meta object (JSON), written after its data object:
// a block without meta is not yet (or no longer) part of the store. It
// holds what choosing blocks for a query, retention and compaction need
// without reading the data, and the block's part of the catalogue.
type Meta struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	// Host is the partition the block belongs to.
	Host string `json:"host"`
	// Node names the store that wrote the block when several (the nodes
	// of a cluster) write into one bucket ("" for a store of its own).
	// Ids are unique without it (NewID's 64 random bits).
	Node string `json:"node,omitempty"`
	// Level is 0 for a block written by ingest, one more than its
	// highest source for a compacted block.
	Level   int       `json:"level"`
	Created time.Time `json:"created"`
	// MinStart and MaxEnd bound the traces' times (unix ns).
	MinStart int64 `json:"min_start"`
	MaxEnd   int64 `json:"max_end"`
	Traces   int   `json:"traces"`
	Spans    int   `json:"spans"`
	// Size is the data object's size in bytes; FooterCRC the CRC-32C of
	// its footer (meta and data must belong together).
	Size      int64  `json:"size"`
	FooterCRC uint32 `json:"footer_crc"`
	// CompactedFrom names the blocks a compaction merged into this one;
	// they are deleted after this meta is written (a reader that still
	// lists one ignores it).
	CompactedFrom []string `json:"compacted_from,omitempty"`
	// The block's part of the catalogue.
	Services []MetaService `json:"services,omitempty"`
	Names    []string      `json:"names,omitempty"` // trace names (roots on Host)
	// Hosts are the hosts of the block's spans (its traces are found by
	// a search for any of them); ErrorTraces counts the traces with an
	// error, MaxDuration is the longest trace (ns): searches skip blocks
	// that cannot match.
	Hosts       []string `json:"hosts,omitempty"`
	ErrorTraces int      `json:"error_traces"`
	MaxDuration int64    `json:"max_duration"`
	// Shared is, per host other than Host, its share of the block's
	// bytes: each trace's encoded size split by its spans.
	Shared map[string]int64 `json:"shared,omitempty"`
}

// MetaService is a service of a block's spans.
type MetaService struct {
	Name       string   `json:"name"`
	ViaService bool     `json:"via_service,omitempty"` // some span has it as its service
	ViaHost    bool     `json:"via_host,omitempty"`    // some span without a service runs on a host of this name
	Operations []MetaOp `json:"operations,omitempty"`
}

// MetaOp is an operation with its span kind (trace.Kind as a number).
type MetaOp struct {
	Name string `json:"name"`
	Kind int    `json:"kind"`
}

// NewID returns a new block id: the creation time in ms (12 hex digits,
// so ids sort by creation) and 8 random bytes.
func NewID(now time.Time) string {
	var r [8]byte
	rand.Read(r[:])
	return fmt.Sprintf("%012x", now.UnixMilli()) + hex.EncodeToString(r[:])
}

// ValidID reports whether s has the form NewID gives.
func ValidID(s string) bool {
	if len(s) != 28 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// The keys of a block's objects: blocks/<host, path-escaped>/<id>/data
// and …/meta.json.
const (
	Prefix   = "blocks/"
	DataName = "data"
	MetaName = "meta.json"
)

// Dir returns the key prefix of a block's objects.
func Dir(host, id string) string { return Prefix + url.PathEscape(host) + "/" + id + "/" }

// ParseKey splits a block object's key into host, id and object name.
func ParseKey(key string) (host, id, name string, ok bool) {
	rest, ok := strings.CutPrefix(key, Prefix)
	if !ok {
		return "", "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || !ValidID(parts[1]) || (parts[2] != DataName && parts[2] != MetaName) {
		return "", "", "", false
	}
	host, err := url.PathUnescape(parts[0])
	if err != nil || host == "" {
		return "", "", "", false
	}
	return host, parts[1], parts[2], true
}

// MarshalMeta encodes a meta object.
func MarshalMeta(m *Meta) ([]byte, error) {
	return json.MarshalIndent(m, "", " ")
}

// ParseMeta decodes and checks a meta object.
func ParseMeta(p []byte) (*Meta, error) {
	var m Meta
	if err := json.Unmarshal(p, &m); err != nil {
		return nil, corruptf("meta: %v", err)
	}
	switch {
	case m.Version < MinVersion || m.Version > Version:
		return nil, corruptf("meta: version %d (this tracebridge reads %d to %d)", m.Version, MinVersion, Version)
	case !ValidID(m.ID):
		return nil, corruptf("meta: id %q", m.ID)
	case m.Host == "":
		return nil, corruptf("meta: no host")
	case m.Size < HeaderSize+FooterSizeV2:
		return nil, corruptf("meta: size %d", m.Size)
	case m.Traces < 0 || m.Spans < 0 || m.Traces > 0 && m.MaxEnd < m.MinStart:
		return nil, corruptf("meta: counts or times out of order")
	}
	return &m, nil
}

// Matches reports how a meta disagrees with its data object's footer
// (nil: they belong together).
func (m *Meta) Matches(size int64, f Footer, footerCRC uint32) error {
	switch {
	case m.Size != size:
		return corruptf("meta says %d bytes, the data object has %d", m.Size, size)
	case m.FooterCRC != footerCRC:
		return corruptf("meta and data belong to different blocks (footer checksum %08x, meta says %08x)", footerCRC, m.FooterCRC)
	case m.Version != int(f.Version):
		return corruptf("meta says version %d, the data object is of version %d", m.Version, f.Version)
	case m.Traces != int(f.Traces):
		return corruptf("meta says %d traces, the data holds %d", m.Traces, f.Traces)
	}
	return nil
}
