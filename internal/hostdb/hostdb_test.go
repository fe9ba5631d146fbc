package hostdb

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/hostauth"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, dir string, o Options) *DB {
	t.Helper()
	db, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestReopen: every change is there after a reopen, whatever came
// between (adds, updates, deletes, contacts).
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	db := open(t, dir, Options{Now: func() time.Time { return now }})
	if _, err := db.Add(Host{Name: "shop-1", Addr: "10.0.0.5", Group: "prod", Comment: "rack 4", MaxSize: 2 << 30, MaxAge: 7 * 24 * time.Hour}, "s3cr3t"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Add(Host{Name: "shop-1"}, ""); !errors.Is(err, ErrHostExists) {
		t.Fatalf("add twice: %v", err)
	}
	if _, err := db.Add(Host{Name: "gone"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Update("shop-1", func(h *Host) error { h.Disabled = true; h.Name = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Update("nobody", func(*Host) error { return nil }); !errors.Is(err, ErrNoHost) {
		t.Fatalf("update of nobody: %v", err)
	}
	if err := db.Delete("gone"); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete("gone"); !errors.Is(err, ErrNoHost) {
		t.Fatalf("delete twice: %v", err)
	}
	db.Contact("auto", now) // traces make a host known
	db.Touch("shop-1", now.Add(time.Minute))
	want := db.Hosts()
	if len(want) != 2 || want[0].Name != "auto" || !want[1].Disabled || want[1].LastContact != now.Add(time.Minute) {
		t.Fatalf("hosts: %+v", want)
	}
	if !hostauth.CheckSecret(want[1].Secret, "s3cr3t") {
		t.Fatal("the secret is not its argon2id hash")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, dir, Options{})
	if d := cmp.Diff(want, db.Hosts()); d != "" {
		t.Fatalf("after a reopen (-want +got):\n%s", d)
	}
	if p := db.Policy("shop-1"); p != (Policy{MaxSize: 2 << 30, MaxAge: 7 * 24 * time.Hour, Disabled: true}) {
		t.Errorf("policy %+v", p)
	}
	if p := db.Policy("nobody"); p != (Policy{}) {
		t.Errorf("policy of nobody %+v", p)
	}
}

// TestChangesAreSyncedBeforeReturn: what a change wrote is on disk when
// it returns — a process killed then (no Close, no flush) loses nothing
// but last contacts. Here the table is read by a second, read-only DB
// while the first is still open, as a restarted process would.
func TestChangesAreSyncedBeforeReturn(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{ContactInterval: time.Hour})
	if _, err := db.Add(Host{Name: "a"}, "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Update("a", func(h *Host) error { h.Secret = hostauth.HashSecret("two"); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Add(Host{Name: "b"}, ""); err != nil {
		t.Fatal(err)
	}
	ro := open(t, dir, Options{ReadOnly: true})
	h, err := ro.Host("a")
	if err != nil || !hostauth.CheckSecret(h.Secret, "two") {
		t.Fatalf("the changed secret: %v %q", err, h.Secret)
	}
	if _, err := ro.Host("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Add(Host{Name: "c"}, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("add to a read-only table: %v", err)
	}
}

// TestLocked: one process changes the table at a time.
func TestLocked(t *testing.T) {
	dir := t.TempDir()
	open(t, dir, Options{})
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
}

// TestTornTail: a last line cut short by a crash is cut off (and said);
// a bad line before the end is an error naming its offset.
func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{})
	for _, n := range []string{"a", "b"} {
		if _, err := db.Add(Host{Name: n}, ""); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	path := filepath.Join(dir, logName)
	good, _ := os.ReadFile(path)
	line := appendEntry(nil, entry{Put: &Host{Name: "c"}})
	for i := 1; i < len(line); i++ {
		os.WriteFile(path, append(append([]byte(nil), good...), line[:i]...), 0o644)
		var logs bytes.Buffer
		db, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("torn at %d: %v", i, err)
		}
		if n := len(db.Hosts()); n != 2 || !strings.Contains(logs.String(), "torn") {
			t.Fatalf("torn at %d: %d hosts, log %q", i, n, logs.String())
		}
		db.Close()
	}
	bad := append([]byte(nil), good...)
	bad[3] ^= 1 // the first line's checksum
	os.WriteFile(path, bad, 0o644)
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "offset 0") {
		t.Fatalf("a bad first line: %v", err)
	}
}

// TestCompaction: a log of many changes is rewritten to one line per
// host, with the same hosts.
func TestCompaction(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{})
	if _, err := db.Add(Host{Name: "a"}, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if _, err := db.Update("a", func(h *Host) error { h.MaxSize = int64(i); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := os.Stat(filepath.Join(dir, logName))
	if st.Size() > 200_000 {
		t.Errorf("log of %d bytes after 2000 updates of one host", st.Size())
	}
	db.Close()
	db = open(t, dir, Options{})
	if p := db.Policy("a"); p.MaxSize != 1999 {
		t.Errorf("after compaction: %+v", p)
	}
}

// TestContactsAreWritten: last contacts reach the disk within the
// interval, without a Close, and at most once a second per host.
func TestContactsAreWritten(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{ContactInterval: 20 * time.Millisecond})
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	db.Contact("h", now)
	db.Touch("h", now.Add(500*time.Millisecond))
	if h, _ := db.Host("h"); !h.LastContact.Equal(now) {
		t.Errorf("within a second: %v", h.LastContact)
	}
	db.Touch("h", now.Add(2*time.Second))
	deadline := time.Now().Add(30 * time.Second)
	for {
		ro := open(t, dir, Options{ReadOnly: true})
		h, _ := ro.Host("h")
		if h.LastContact.Equal(now.Add(2 * time.Second)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("last contact on disk: %v", h.LastContact)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAuth: zico's rules over the table: with security off an unknown
// host is created with its address; with it on, address and secret must
// match; a bearer token finds its host.
func TestAuth(t *testing.T) {
	db := open(t, t.TempDir(), Options{})
	auth := db.Auth()
	ctx := context.Background()
	from := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}
	if adm, err := auth.Admit(ctx, "new", from, "", false); adm != hostauth.Admitted || err != nil {
		t.Fatalf("security off: %v %v", adm, err)
	}
	if h, _ := db.Host("new"); h.Addr != "127.0.0.1" || h.LastContact.IsZero() {
		t.Errorf("created %+v", h)
	}
	if adm, _ := auth.Admit(ctx, "stranger", from, "", true); adm != hostauth.Refused {
		t.Errorf("unknown host with security on: %v", adm)
	}
	if _, err := db.Add(Host{Name: "shop"}, "tok"); err != nil {
		t.Fatal(err)
	}
	if adm, _ := auth.Admit(ctx, "shop", from, "bad", true); adm != hostauth.Refused {
		t.Errorf("wrong secret: %v", adm)
	}
	if name, adm, err := auth.HostByToken(ctx, "tok", from); name != "shop" || adm != hostauth.Admitted || err != nil {
		t.Errorf("token: %s %v %v", name, adm, err)
	}
	db.Update("shop", func(h *Host) error { h.Disabled = true; return nil })
	if auth.Status("shop") != hostauth.Disabled {
		t.Error("disabled host")
	}
	db.Delete("shop")
	if auth.Status("shop") != hostauth.Deleted {
		t.Error("deleted host")
	}
}

// TestImport: records of the store's old JSON are carried over; a host
// already there is kept; bad records are errors.
func TestImport(t *testing.T) {
	db := open(t, t.TempDir(), Options{})
	db.Add(Host{Name: "kept", Group: "new"}, "")
	n, err := db.Import([][]byte{
		[]byte(`{"name":"old","id":4,"addr":"10.1.1.1","secret":"$argon2id$x","group":"g","maxSize":10,"maxAge":20,"disabled":true,"created":"2026-01-02T03:04:05Z","lastContact":"2026-01-03T00:00:00Z","shared":80}`),
		[]byte(`{"name":"kept","id":5,"group":"old"}`),
	})
	if err != nil || n != 1 {
		t.Fatalf("import: %d %v", n, err)
	}
	want := Host{Name: "old", Addr: "10.1.1.1", Secret: "$argon2id$x", Group: "g", MaxSize: 10, MaxAge: 20, Disabled: true,
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), LastContact: time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)}
	if h, _ := db.Host("old"); !cmp.Equal(h, want) {
		t.Errorf("imported %+v", h)
	}
	if h, _ := db.Host("kept"); h.Group != "new" {
		t.Errorf("a host already there: %+v", h)
	}
	if _, err := db.Import([][]byte{[]byte(`{"name":""}`)}); err == nil {
		t.Error("a nameless record imported")
	}
	if _, err := db.Import([][]byte{[]byte(`{`)}); err == nil {
		t.Error("bad JSON imported")
	}
}

// TestOnChangeAndApply: OnChange hears of the table's own changes (add,
// update, delete, a host created by its data), not of Apply and Remove;
// Apply writes a record as it is but keeps a later last contact, and an
// equal record is not written again.
func TestOnChangeAndApply(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	db := open(t, dir, Options{Now: func() time.Time { return now }})
	var heard []string
	db.OnChange(func(name string) { heard = append(heard, name) })
	if _, err := db.Add(Host{Name: "a"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Update("a", func(h *Host) error { h.Group = "g"; return nil }); err != nil {
		t.Fatal(err)
	}
	db.Contact("b", now)
	db.Contact("b", now.Add(2*time.Second)) // known: no change of the record
	if err := db.Delete("a"); err != nil {
		t.Fatal(err)
	}
	remote := Host{Name: "c", Secret: "$argon2id$x", Group: "prod", Created: now.Add(-time.Hour)}
	if changed, err := db.Apply(remote); err != nil || !changed {
		t.Fatalf("Apply: %v %v", changed, err)
	}
	db.Touch("c", now.Add(time.Minute))
	if changed, err := db.Apply(remote); err != nil || changed {
		t.Fatalf("Apply of an equal record: changed %v, %v", changed, err)
	}
	remote.Comment = "moved"
	if _, err := db.Apply(remote); err != nil {
		t.Fatal(err)
	}
	got, _ := db.Host("c")
	if got.Comment != "moved" || !got.LastContact.Equal(now.Add(time.Minute)) || !got.Created.Equal(remote.Created) {
		t.Errorf("after Apply: %+v", got)
	}
	if gone, err := db.Remove("c"); err != nil || !gone {
		t.Fatalf("Remove: %v %v", gone, err)
	}
	if gone, _ := db.Remove("c"); gone {
		t.Error("Remove of a missing host reported one")
	}
	if d := cmp.Diff([]string{"a", "a", "b", "a"}, heard); d != "" {
		t.Errorf("OnChange heard (-want +got):\n%s", d)
	}
}
