// Package hostdb keeps the host table: the records of the monitored hosts
// (name, address, the argon2id hash of the secret, group, comment,
// enabled, the bounds of their stored traces, created, last contact) in a
// directory of their own, <data_dir>/hosts, apart from any trace store.
// Receivers authenticate hosts over it (DB.Auth, zico's rules in
// internal/hostauth) with or without a store sink; the trace store asks it
// for each host's bounds through the store sink.
//
// On disk (docs/HOSTS.md):
//
//	hosts.log     one line per change: 8 hex digits of the CRC-32C of the
//	              JSON that follows, a space, {"put":{host}} or
//	              {"del":"name"}, a newline. A change is appended and
//	              synced before it returns, so a kill -9 (or a power cut)
//	              never loses an added host or a changed secret. A torn
//	              last line (a crash mid-write) is cut on open and logged;
//	              a bad line before it is an error. The log is rewritten
//	              whole (temporary file, sync, rename, sync of the
//	              directory) when it holds many more lines than hosts.
//	contact.json  the hosts' last contacts, rewritten (not synced) at most
//	              once a second: a crash loses at most recent contacts.
//	LOCK          held (flock) by the one process that may change the
//	              table; a read-only DB takes no lock.
//
// Concurrency: a DB is safe for concurrent use. Policy and Touch of a known
// host take a read lock and do not allocate.
package hostdb

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tracebridge/tracebridge/internal/hostauth"
	"github.com/tracebridge/tracebridge/internal/lograte"
)

// Host is a monitored host's record. Its JSON is also that of the host
// records trace stores kept before this package (Import reads them).
type Host struct {
	Name string `json:"name"`
	// Addr, when set, is the only address the host may connect from
	// (with security on).
	Addr string `json:"addr,omitempty"`
	// Secret is the argon2id hash of the host's secret ("" when none):
	// never the secret itself.
	Secret  string `json:"secret,omitempty"`
	Group   string `json:"group,omitempty"`
	Comment string `json:"comment,omitempty"`
	// MaxSize (bytes) and MaxAge bound the host's stored traces (0:
	// unbounded); the trace store drops the oldest first.
	MaxSize int64         `json:"maxSize,omitempty"`
	MaxAge  time.Duration `json:"maxAge,omitempty"`
	// Disabled hosts' traces are dropped (and answered OK).
	Disabled    bool      `json:"disabled,omitempty"`
	Created     time.Time `json:"created"`
	LastContact time.Time `json:"lastContact,omitzero"`
}

// Sentinel errors.
var (
	ErrNoHost     = errors.New("no such host")
	ErrHostExists = errors.New("host exists")
	ErrClosed     = errors.New("host table closed")
	// ErrLocked: another process holds the table open for changes.
	ErrLocked = errors.New("host table in use by another process")
)

// Options configure a DB.
type Options struct {
	// ReadOnly opens the table for reading: no lock, no changes.
	ReadOnly bool
	// Logger hears about recovery (a torn tail) and failed writes of
	// last contacts.
	Logger *slog.Logger
	// Now is the clock of created hosts and last contacts (nil:
	// time.Now).
	Now func() time.Time
	// ContactInterval is how often last contacts are written (default
	// 1 s).
	ContactInterval time.Duration
}

// DB is an open host table.
type DB struct {
	dir string
	opt Options

	mu    sync.RWMutex
	hosts map[string]*Host
	log   *os.File // hosts.log, appended (nil when read-only)
	lines int      // lines in hosts.log
	lock  *os.File
	// contact guards the last contacts (Host.LastContact) apart from mu's
	// writers: Touch of a known host holds mu for reading only.
	contact sync.Mutex
	dirty   bool
	closed  bool

	faults lograte.Limiter
	// watchers hear of changes (OnChange); guarded by watchMu, called
	// after mu is released.
	watchMu  sync.Mutex
	watchers []func(name string)
	stop     chan struct{}
	done     chan struct{}
}

const (
	logName     = "hosts.log"
	contactName = "contact.json"
	lockName    = "LOCK"
	// maxLine bounds a line of hosts.log.
	maxLine = 1 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// entry is a line of hosts.log.
type entry struct {
	Put *Host  `json:"put,omitempty"`
	Del string `json:"del,omitempty"`
}

// Open opens (creating it unless read-only) the host table in dir.
func Open(dir string, o Options) (*DB, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ContactInterval <= 0 {
		o.ContactInterval = time.Second
	}
	db := &DB{dir: dir, opt: o, hosts: map[string]*Host{}, faults: lograte.Limiter{PerSecond: 1}}
	if !o.ReadOnly {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("host table %s: %w", dir, err)
		}
		lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("host table %s: %w", dir, err)
		}
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			lock.Close()
			return nil, fmt.Errorf("host table %s: %w", dir, ErrLocked)
		}
		db.lock = lock
	}
	if err := db.load(); err != nil {
		db.release()
		return nil, fmt.Errorf("host table %s: %w", dir, err)
	}
	if !o.ReadOnly {
		// Rewriting at open leaves a log of one line per host.
		if err := db.rewrite(); err != nil {
			db.release()
			return nil, fmt.Errorf("host table %s: %w", dir, err)
		}
		db.stop, db.done = make(chan struct{}), make(chan struct{})
		go db.flusher()
	}
	return db, nil
}

func (db *DB) release() {
	if db.log != nil {
		db.log.Close()
		db.log = nil
	}
	if db.lock != nil {
		db.lock.Close()
		db.lock = nil
	}
}

// Dir returns the table's directory.
func (db *DB) Dir() string { return db.dir }

// load reads hosts.log (cutting a torn tail) and contact.json.
func (db *DB) load() error {
	path := filepath.Join(db.dir, logName)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return db.loadContacts()
	case err != nil:
		return err
	}
	var off int
	for off < len(b) {
		n := bytes.IndexByte(b[off:], '\n')
		if n < 0 {
			// The last line has no newline: a crash cut it short.
			if err := db.cut(path, off, len(b)-off); err != nil {
				return err
			}
			break
		}
		if err := db.apply(b[off : off+n]); err != nil {
			if off+n+1 < len(b) {
				return fmt.Errorf("%s: line at offset %d: %w", logName, off, err)
			}
			// The last line is bad: torn by a crash.
			if err := db.cut(path, off, len(b)-off); err != nil {
				return err
			}
			break
		}
		off += n + 1
		db.lines++
	}
	return db.loadContacts()
}

// cut truncates hosts.log at off (a torn last line of n bytes) and says
// so; read-only it only skips it.
func (db *DB) cut(path string, off, n int) error {
	if db.opt.ReadOnly {
		return nil
	}
	if err := os.Truncate(path, int64(off)); err != nil {
		return err
	}
	db.opt.Logger.Warn("host table: cut a torn last line", "dir", db.dir, "offset", off, "bytes", n)
	return nil
}

// apply applies one line of hosts.log (without its newline).
func (db *DB) apply(line []byte) error {
	sum, body, ok := bytes.Cut(line, []byte{' '})
	if !ok || len(sum) != 8 {
		return errors.New("want a checksum and JSON")
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil || crc32.Checksum(body, crcTable) != uint32(want) {
		return errors.New("checksum mismatch")
	}
	var e entry
	if err := json.Unmarshal(body, &e); err != nil {
		return err
	}
	switch {
	case e.Put != nil && e.Put.Name != "":
		db.hosts[e.Put.Name] = e.Put
	case e.Del != "":
		delete(db.hosts, e.Del)
	default:
		return errors.New("neither put nor del")
	}
	return nil
}

// loadContacts reads contact.json: a missing or bad one loses only last
// contacts.
func (db *DB) loadContacts() error {
	b, err := os.ReadFile(filepath.Join(db.dir, contactName))
	if err != nil {
		return nil
	}
	var m map[string]time.Time
	if err := json.Unmarshal(b, &m); err != nil {
		db.opt.Logger.Warn("host table: last contacts unreadable, ignored", "dir", db.dir, "err", err)
		return nil
	}
	for name, at := range m {
		if h := db.hosts[name]; h != nil && at.After(h.LastContact) {
			h.LastContact = at
		}
	}
	return nil
}

// rewrite writes hosts.log anew, one line per host, and opens it for
// appending. mu is held (or the DB is not shared yet).
func (db *DB) rewrite() error {
	path := filepath.Join(db.dir, logName)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	var buf []byte
	for _, h := range db.sorted() {
		buf = appendEntry(buf[:0], entry{Put: h})
		w.Write(buf)
	}
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(db.dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rewriting %s: %w", logName, err)
	}
	if db.log != nil {
		db.log.Close()
	}
	db.log, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	db.lines = len(db.hosts)
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func appendEntry(dst []byte, e entry) []byte {
	body, _ := json.Marshal(e) // a Host always marshals
	dst = fmt.Appendf(dst, "%08x ", crc32.Checksum(body, crcTable))
	dst = append(dst, body...)
	return append(dst, '\n')
}

// write appends e to hosts.log and syncs it, then applies it. mu is held
// for writing.
func (db *DB) write(e entry) error {
	if db.closed || db.opt.ReadOnly {
		return ErrClosed
	}
	if e.Put != nil {
		db.contact.Lock()
		if h := db.hosts[e.Put.Name]; h != nil && h.LastContact.After(e.Put.LastContact) {
			e.Put.LastContact = h.LastContact
		}
		db.contact.Unlock()
	}
	line := appendEntry(nil, e)
	if len(line) > maxLine {
		return fmt.Errorf("host record of %d bytes: over %d", len(line), maxLine)
	}
	if _, err := db.log.Write(line); err != nil {
		return fmt.Errorf("host table %s: %w", db.dir, err)
	}
	if err := db.log.Sync(); err != nil {
		return fmt.Errorf("host table %s: %w", db.dir, err)
	}
	db.lines++
	switch {
	case e.Put != nil:
		db.hosts[e.Put.Name] = e.Put
	default:
		delete(db.hosts, e.Del)
	}
	if db.lines > 2*len(db.hosts)+1024 {
		if err := db.rewrite(); err != nil {
			// The change is safe in the old log; compaction waits for the
			// next change.
			db.opt.Logger.Warn("host table: compaction failed", "dir", db.dir, "err", err)
		}
	}
	return nil
}

func (db *DB) sorted() []*Host {
	out := make([]*Host, 0, len(db.hosts))
	for _, h := range db.hosts {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Hosts returns every host, by name.
func (db *DB) Hosts() []Host {
	db.mu.RLock()
	defer db.mu.RUnlock()
	db.contact.Lock()
	defer db.contact.Unlock()
	out := make([]Host, 0, len(db.hosts))
	for _, h := range db.sorted() {
		out = append(out, *h)
	}
	return out
}

// Host returns the named host.
func (db *DB) Host(name string) (Host, error) {
	h, ok := db.get(name)
	if !ok {
		return Host{}, fmt.Errorf("%w: %s", ErrNoHost, name)
	}
	return h, nil
}

func (db *DB) get(name string) (Host, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	h := db.hosts[name]
	if h == nil {
		return Host{}, false
	}
	db.contact.Lock()
	defer db.contact.Unlock()
	return *h, true
}

func validName(name string) error {
	if name == "" || strings.ContainsAny(name, "\x00\n") || len(name) > 1024 {
		return fmt.Errorf("host name %q: want a non-empty name without NUL or newline, at most 1024 bytes", name)
	}
	return nil
}

// Add creates a host (secret, when not empty, is hashed with argon2id).
func (db *DB) Add(h Host, secret string) (Host, error) {
	if err := validName(h.Name); err != nil {
		return Host{}, err
	}
	if secret != "" {
		h.Secret = hostauth.HashSecret(secret)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if _, ok := db.hosts[h.Name]; ok {
		return Host{}, fmt.Errorf("%w: %s", ErrHostExists, h.Name)
	}
	if h.Created.IsZero() {
		h.Created = db.opt.Now().UTC()
	}
	if err := db.write(entry{Put: &h}); err != nil {
		return Host{}, err
	}
	defer db.changed(h.Name)
	return h, nil
}

// Update changes a host: update gets a copy of the record and changes it
// (it may not change the name).
func (db *DB) Update(name string, update func(*Host) error) (Host, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	old := db.hosts[name]
	if old == nil {
		return Host{}, fmt.Errorf("%w: %s", ErrNoHost, name)
	}
	db.contact.Lock()
	h := *old
	db.contact.Unlock()
	if err := update(&h); err != nil {
		return Host{}, err
	}
	h.Name = name
	if err := db.write(entry{Put: &h}); err != nil {
		return Host{}, err
	}
	defer db.changed(name)
	return h, nil
}

// Delete removes a host's record.
func (db *DB) Delete(name string) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.hosts[name] == nil {
		return fmt.Errorf("%w: %s", ErrNoHost, name)
	}
	if err := db.write(entry{Del: name}); err != nil {
		return err
	}
	defer db.changed(name)
	return nil
}

// Touch records a host's last contact, at most once a second (best
// effort: written by the next flush, not synced). Unknown hosts are
// ignored.
func (db *DB) Touch(name string, at time.Time) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if h := db.hosts[name]; h != nil {
		db.touch(h, at)
	}
}

func (db *DB) touch(h *Host, at time.Time) {
	db.contact.Lock()
	if at.Sub(h.LastContact) >= time.Second {
		h.LastContact = at.UTC()
		db.dirty = true
	}
	db.contact.Unlock()
}

// Contact records that host name sent data at: its last contact, and a
// new record when the table has none (data of any source makes a host
// known, as a ZICO HELLO with security off does).
func (db *DB) Contact(name string, at time.Time) {
	db.mu.RLock()
	h := db.hosts[name]
	if h != nil {
		db.touch(h, at)
	}
	db.mu.RUnlock()
	if h != nil || validName(name) != nil {
		return
	}
	if err := db.create(name, "", at); err != nil && !errors.Is(err, ErrClosed) {
		if n, ok := db.faults.Allow(); ok {
			db.opt.Logger.Error("host table: cannot add a host", "dir", db.dir, "host", name, "err", err, "suppressed", n)
		}
	}
}

// create adds host name with addr, unless it exists, and touches it.
func (db *DB) create(name, addr string, at time.Time) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	h := db.hosts[name]
	if h == nil {
		h = &Host{Name: name, Addr: addr, Created: at.UTC()}
		if err := db.write(entry{Put: h}); err != nil {
			return err
		}
		defer db.changed(name)
	}
	db.touch(h, at)
	return nil
}

// Policy is what the table says of a host's stored traces.
type Policy struct {
	MaxSize  int64
	MaxAge   time.Duration
	Disabled bool
}

// Policy returns the bounds of host name's traces and whether they are
// dropped (the zero Policy for an unknown host).
func (db *DB) Policy(name string) Policy {
	db.mu.RLock()
	defer db.mu.RUnlock()
	h := db.hosts[name]
	if h == nil {
		return Policy{}
	}
	return Policy{MaxSize: h.MaxSize, MaxAge: h.MaxAge, Disabled: h.Disabled}
}

// Import adds host records kept elsewhere before (the JSON of the host
// records of a trace store written before this package, whose fields are
// Host's): a host the table has already is left as it is, so importing
// twice changes nothing. It returns how many hosts were added.
func (db *DB) Import(records [][]byte) (int, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	n := 0
	for i, rec := range records {
		var h Host
		if err := json.Unmarshal(rec, &h); err != nil {
			return n, fmt.Errorf("host record %d: %w", i, err)
		}
		if err := validName(h.Name); err != nil {
			return n, fmt.Errorf("host record %d: %w", i, err)
		}
		if db.hosts[h.Name] != nil {
			continue
		}
		if err := db.write(entry{Put: &h}); err != nil {
			return n, err
		}
		defer db.changed(h.Name)
		n++
	}
	return n, nil
}

// flusher writes the last contacts when they changed, every
// ContactInterval.
func (db *DB) flusher() {
	defer close(db.done)
	t := time.NewTicker(db.opt.ContactInterval)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
			if err := db.flushContacts(); err != nil {
				if n, ok := db.faults.Allow(); ok {
					db.opt.Logger.Warn("host table: writing last contacts failed", "dir", db.dir, "err", err, "suppressed", n)
				}
			}
		}
	}
}

// flushContacts rewrites contact.json (not synced) when a contact
// changed.
func (db *DB) flushContacts() error {
	db.mu.RLock()
	db.contact.Lock()
	if !db.dirty {
		db.contact.Unlock()
		db.mu.RUnlock()
		return nil
	}
	m := make(map[string]time.Time, len(db.hosts))
	for name, h := range db.hosts {
		if !h.LastContact.IsZero() {
			m[name] = h.LastContact
		}
	}
	db.dirty = false
	db.contact.Unlock()
	db.mu.RUnlock()
	b, _ := json.Marshal(m)
	path := filepath.Join(db.dir, contactName)
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// Close writes the last contacts and closes the table. It is safe to call
// twice.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	db.mu.Unlock()
	var err error
	if db.stop != nil {
		close(db.stop)
		<-db.done
		err = db.flushContacts()
	}
	db.mu.Lock()
	db.release()
	db.mu.Unlock()
	return err
}

// Auth returns host authentication (zico's host table rules, OTLP's
// bearer tokens) over the table.
func (db *DB) Auth() *hostauth.Checker { return hostauth.New(authRows{db}, db.opt.Now) }

// authRows are the table as host authentication reads and creates hosts.
type authRows struct{ db *DB }

var _ hostauth.Rows = authRows{}

func authHost(h Host) hostauth.Host {
	return hostauth.Host{Name: h.Name, Addr: h.Addr, Secret: h.Secret, Disabled: h.Disabled}
}

func (r authRows) Host(name string) (hostauth.Host, bool) {
	h, ok := r.db.get(name)
	return authHost(h), ok
}

func (r authRows) Hosts() ([]hostauth.Host, error) {
	hosts := r.db.Hosts()
	out := make([]hostauth.Host, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, authHost(h))
	}
	return out, nil
}

// Create makes a record for an unknown host admitted with security off,
// with addr as its address unless it has one.
func (r authRows) Create(name, addr string) error {
	if err := validName(name); err != nil {
		return err
	}
	if err := r.db.create(name, addr, r.db.opt.Now()); err != nil {
		return err
	}
	h, _ := r.db.get(name)
	if h.Addr != "" || addr == "" {
		return nil
	}
	_, err := r.db.Update(name, func(h *Host) error {
		if h.Addr == "" {
			h.Addr = addr
		}
		return nil
	})
	return err
}

func (r authRows) Touch(name string, at time.Time) { r.db.Touch(name, at) }

// OnChange registers fn, told the name of every host whose record a
// change of this table made, removed or replaced: Add, Update, Delete,
// Import, and a host created by Contact or by authentication. Changes
// applied with Apply and Remove (decided elsewhere: another node of a
// cluster) are not told. fn is called in the order of the changes with
// the table locked: it must not block nor call the DB (queue the name and
// read the record later).
func (db *DB) OnChange(fn func(name string)) {
	db.watchMu.Lock()
	db.watchers = append(db.watchers, fn)
	db.watchMu.Unlock()
}

// changed tells the OnChange functions of a change (mu is held).
func (db *DB) changed(name string) {
	db.watchMu.Lock()
	fns := db.watchers
	db.watchMu.Unlock()
	for _, fn := range fns {
		fn(name)
	}
}

// Apply puts a host record decided elsewhere (another node of a cluster)
// into the table as it is, secret hash and created time included; the
// host's last contact stays this table's when it is later. It reports
// whether the table changed (an equal record is not written again).
// OnChange's functions are not told.
func (db *DB) Apply(h Host) (bool, error) {
	if err := validName(h.Name); err != nil {
		return false, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if old := db.hosts[h.Name]; old != nil {
		db.contact.Lock()
		a, b := *old, h
		db.contact.Unlock()
		a.LastContact, b.LastContact = time.Time{}, time.Time{}
		if Equal(a, b) {
			return false, nil
		}
	}
	if err := db.write(entry{Put: &h}); err != nil {
		return false, err
	}
	return true, nil
}

// Remove deletes a host's record because it was deleted elsewhere
// (another node of a cluster); it reports whether there was one.
// OnChange's functions are not told.
func (db *DB) Remove(name string) (bool, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.hosts[name] == nil {
		return false, nil
	}
	if err := db.write(entry{Del: name}); err != nil {
		return false, err
	}
	return true, nil
}

// Equal reports whether two host records are the same, to the
// nanosecond of their times (whatever their locations).
func Equal(a, b Host) bool {
	return a.Name == b.Name && a.Addr == b.Addr && a.Secret == b.Secret && a.Group == b.Group &&
		a.Comment == b.Comment && a.MaxSize == b.MaxSize && a.MaxAge == b.MaxAge && a.Disabled == b.Disabled &&
		a.Created.Equal(b.Created) && a.LastContact.Equal(b.LastContact)
}
