package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/hostauth"
	"github.com/tracebridge/tracebridge/internal/hostdb"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// openHosts opens a host table (the real one, internal/hostdb) in a
// temporary directory.
func openHosts(t *testing.T, now func() time.Time) *hostdb.DB {
	t.Helper()
	db, err := hostdb.Open(filepath.Join(t.TempDir(), "hosts"), hostdb.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// table is a host table as the store asks it (the store sink wires the
// same).
type table struct{ db *hostdb.DB }

func tableOf(db *hostdb.DB) HostTable { return table{db} }

func (t table) Policy(name string) HostPolicy     { return HostPolicy(t.db.Policy(name)) }
func (t table) Contact(name string, at time.Time) { t.db.Contact(name, at) }

// TestLegacyHostsMigrate: a store written by the version that kept host
// records in its index (testdata/legacy-hosts, see testdata/README.md)
// hands them to the host table: nothing lost (secrets, addresses, groups,
// comments, bounds, disabled, created, last contact), its traces and each
// host's shared bytes still there; importing twice changes nothing.
func TestLegacyHostsMigrate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	// a copy of the golden store, which opening it changes
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "legacy-hosts"))); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	hosts := openHosts(t, func() time.Time { return now })
	s := open(t, dir, Options{Hosts: tableOf(hosts), Now: func() time.Time { return now }})
	legacy := s.LegacyHosts()
	if len(legacy) != 5 {
		t.Fatalf("legacy host records: %d, want 5", len(legacy))
	}
	sizeBefore := s.HostSize("db")
	if sizeBefore <= 0 {
		t.Fatalf("db's shared bytes before the migration: %d", sizeBefore)
	}
	if n, err := hosts.Import(legacy); err != nil || n != 5 {
		t.Fatalf("import: %d %v", n, err)
	}
	if err := s.DropLegacyHosts(); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	want := []hostdb.Host{
		{Name: "auto-1", Created: created, LastContact: created},
		{Name: "db", Created: created, LastContact: created},
		{Name: "shop-1", Addr: "127.0.0.1", Group: "shops", Comment: "the first shop", MaxSize: 2 << 30, MaxAge: 7 * 24 * time.Hour, Created: created},
		{Name: "shop-2", Group: "shops", Disabled: true, Created: created},
		{Name: "token-host", Created: created},
	}
	got := hosts.Hosts()
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(hostdb.Host{}, "Secret")); d != "" {
		t.Fatalf("hosts after the migration (-want +got):\n%s", d)
	}
	for name, secret := range map[string]string{"shop-1": "s3cr3t", "shop-2": "other", "token-host": "tok-123"} {
		h, _ := hosts.Host(name)
		if !hostauth.CheckSecret(h.Secret, secret) {
			t.Errorf("%s: its secret did not carry over (%q)", name, h.Secret)
		}
	}
	if h, _ := hosts.Host("auto-1"); h.Secret != "" {
		t.Errorf("auto-1 has a secret %q", h.Secret)
	}
	// The traces and shares stay.
	if got, err := s.Get(trace.ID{Hi: 7, Lo: 2}); err != nil || len(got.Spans) != 3 {
		t.Fatalf("the legacy store's trace: %v %v", got, err)
	}
	if n := s.HostSize("db"); n != sizeBefore {
		t.Errorf("db's size after the migration: %d, want %d", n, sizeBefore)
	}
	// A reopened store has no legacy records left, keeps the shares, and
	// a second import adds nothing.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{Hosts: tableOf(hosts), Now: func() time.Time { return now }})
	if l := s.LegacyHosts(); len(l) != 0 {
		t.Fatalf("legacy records after the migration: %q", l)
	}
	if n := s.HostSize("db"); n != sizeBefore {
		t.Errorf("db's size after a reopen: %d, want %d", n, sizeBefore)
	}
	if n, err := hosts.Import(legacy); err != nil || n != 0 {
		t.Fatalf("second import: %d %v", n, err)
	}
	// The converted store's partitions: the hosts that hold traces.
	if ps := s.Partitions(); len(ps) != 1 || ps[0].Name != "auto-1" || ps[0].Traces != 1 {
		t.Fatalf("partitions: %+v", ps)
	}
}

// TestDisabledHostDropped: the host table's disabled hosts' traces are
// dropped (counted), others stored.
func TestDisabledHostDropped(t *testing.T) {
	hosts := openHosts(t, nil)
	if _, err := hosts.Add(hostdb.Host{Name: "off", Disabled: true}, ""); err != nil {
		t.Fatal(err)
	}
	s := open(t, t.TempDir(), Options{Hosts: tableOf(hosts)})
	dropped, err := s.Append([]*trace.Trace{mkTrace(1, "off", 2, 1e9, 100, false), mkTrace(2, "on", 2, 1e9, 100, false)})
	if err != nil || dropped != 1 {
		t.Fatalf("append: dropped %d, %v", dropped, err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(trace.ID{Hi: 7, Lo: 2}); err != ErrNotFound {
		t.Errorf("a disabled host's trace: %v", err)
	}
	if _, err := s.Get(trace.ID{Hi: 7, Lo: 3}); err != nil {
		t.Errorf("an enabled host's trace: %v", err)
	}
	// Traces make their hosts known to the table.
	if _, err := hosts.Host("on"); err != nil {
		t.Errorf("a host of stored traces: %v", err)
	}
}
