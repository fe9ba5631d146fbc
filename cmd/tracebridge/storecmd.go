package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/tracebridge/tracebridge/internal/hostauth"
	"github.com/tracebridge/tracebridge/internal/hostdb"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/progress"
	"github.com/tracebridge/tracebridge/internal/store"
)

const storeSynopsis = `store check|rebuild|migrate DIR|s3://BUCKET/PREFIX [--s3-endpoint URL]

check verifies a trace store, also while serve writes it: every block's
meta against its data, every part's checksum, every trace; it exits 1
when it finds problems. rebuild (no serve running) repairs what the blocks
alone allow: metas written again from their data, data objects without a
meta. migrate converts a store of version 1 (DIR/index and its segments)
into blocks (serve does it when it opens one), with progress on a
terminal; the old files are kept under DIR/v1-migrated.`

func cmdStore(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("store", storeSynopsis, stderr)
	loc := addStoreFlags(fs, "", "the trace store (or give it as DIR)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || pos[0] != "check" && pos[0] != "rebuild" && pos[0] != "migrate" {
		return usagef("store: want check, rebuild or migrate, then DIR (or s3://BUCKET/PREFIX)")
	}
	loc.loc = pos[1]
	dir, o, cleanup, err := loc.resolve()
	if err != nil {
		return err
	}
	defer cleanup()
	if pos[0] == "migrate" {
		var done atomic.Int64
		var bar *progress.Bar
		res, err := store.Migrate(dir, o, func(d, total int64) {
			if bar == nil {
				bar = progress.Start(stderr, total, done.Load)
			}
			done.Store(d)
		})
		if bar != nil {
			bar.Stop()
		}
		if err != nil {
			return withCode(exitData, err)
		}
		fmt.Fprintf(stdout, "%s: converted %d hosts, %d segments, %d traces into %d blocks; the old files are in %s\n", pos[1], res.Hosts, res.Segments, res.Traces, res.Blocks, res.Kept)
		for _, l := range res.Lost {
			fmt.Fprintf(stdout, "not carried over: %s\n", l)
		}
		return nil
	}
	var res store.CheckResult
	if pos[0] == "check" {
		res, err = store.Check(dir, o)
	} else {
		res, err = store.Rebuild(dir, o)
	}
	if err != nil {
		return withCode(exitData, err)
	}
	fmt.Fprintf(stdout, "%s: %d hosts, %d blocks, %d write-ahead files, %d traces\n", pos[1], res.Hosts, res.Blocks, res.WAL, res.Traces)
	if res.InSeveral > 0 {
		more := ""
		if res.Uncounted {
			more = " (of the first ones only)"
		}
		fmt.Fprintf(stdout, "%d traces in more than one block%s: parts, or copies written by nodes sharing the bucket; read once, each span once, merged by compaction\n", res.InSeveral, more)
	}
	for _, p := range res.Problems {
		fmt.Fprintf(stdout, "problem: %s\n", p)
	}
	for _, r := range res.Repaired {
		fmt.Fprintf(stdout, "repaired: %s\n", r)
	}
	if pos[0] == "check" && len(res.Problems) > 0 {
		return withCode(exitData, fmt.Errorf("store %s: %d problems", pos[1], len(res.Problems)))
	}
	return nil
}

const hostsSynopsis = `hosts [--data-dir DIR] [--store DIR] list [--json]
       tracebridge hosts [--data-dir DIR] add NAME [--addr IP] [--secret-file F] [--group G] [--comment C] [--max-size 2GiB] [--max-age 7d]
       tracebridge hosts [--data-dir DIR] set NAME [the options of add]
       tracebridge hosts [--data-dir DIR] [--store DIR] enable|disable|delete NAME

Manages zico's host table, DATA-DIR/hosts, when no serve holds it open
(while one runs, use its HTTP API: /api/v1/hosts); list works either way.
The table serves with or without a trace store. A secret is read from the
first line of --secret-file (newline stripped) and stored as an argon2id
hash, never in plain text; with security on, a zorka agent must present it
in its HELLO, an OTLP exporter as a bearer token. delete removes the host
and, when the trace store is there, its traces. --store names the trace
store (default DATA-DIR/store; given alone, DATA-DIR is its parent): list
shows each host's stored bytes from it, and host records kept in a store
written before the table moved out of it are carried into the table.`

func cmdHosts(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("hosts", hostsSynopsis, stderr)
	dataDir := fs.String("data-dir", "tracebridge-data", "the bridge's data directory (the host table is DATA-DIR/hosts)")
	dir := fs.String("store", "", "the trace store directory (default DATA-DIR/store)")
	asJSON := fs.Bool("json", false, "list: one JSON object per host")
	addr := fs.String("addr", "", "the only address the host may connect from (with security on)")
	secretFile := fs.String("secret-file", "", "a file whose first line is the host's secret")
	group := fs.String("group", "", "the host's group")
	comment := fs.String("comment", "", "a comment")
	maxSize := fs.String("max-size", "", "bound of the host's stored traces (e.g. 2GiB); the oldest go first")
	maxAge := fs.String("max-age", "", "bound of the age of the host's traces (e.g. 7d, 12h)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if len(pos) == 0 {
		return usagef("hosts: want list, add, set, enable, disable or delete")
	}
	cmd := pos[0]
	if cmd == "list" && len(pos) != 1 || cmd != "list" && len(pos) != 2 {
		return usagef("hosts %s: want %s", cmd, map[bool]string{true: "no arguments", false: "one host NAME"}[cmd == "list"])
	}
	var secret string
	if *secretFile != "" {
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			return withCode(exitConfig, err)
		}
		secret, _, _ = strings.Cut(string(b), "\n")
		secret = strings.TrimSuffix(secret, "\r")
		if secret == "" {
			return withCode(exitConfig, fmt.Errorf("%s: the first line is empty", *secretFile))
		}
	}
	var size int64
	if *maxSize != "" {
		if size, err = pipeline.ParseByteSize(*maxSize); err != nil {
			return usagef("hosts: --max-size: %v", err)
		}
	}
	var age time.Duration
	if *maxAge != "" {
		if age, err = pipeline.ParseDuration(*maxAge); err != nil || age < 0 {
			return usagef("hosts: --max-age %q: want e.g. 7d or 12h", *maxAge)
		}
	}
	if *dir == "" {
		*dir = filepath.Join(*dataDir, "store")
	} else if !given["data-dir"] {
		*dataDir = filepath.Dir(filepath.Clean(*dir))
	}
	db, err := hostdb.Open(filepath.Join(*dataDir, "hosts"), hostdb.Options{})
	if errors.Is(err, hostdb.ErrLocked) && cmd == "list" {
		db, err = hostdb.Open(filepath.Join(*dataDir, "hosts"), hostdb.Options{ReadOnly: true})
	}
	if err != nil {
		if errors.Is(err, hostdb.ErrLocked) {
			return withCode(exitConfig, fmt.Errorf("%w (a running serve holds it open: change hosts through its HTTP API, /api/v1/hosts)", err))
		}
		return withCode(exitConfig, err)
	}
	defer db.Close()
	// The trace store: when given, or when it exists (a host table serves
	// without one).
	var s *store.Store
	if storeExists(*dir) || given["store"] {
		s, err = store.Open(*dir, store.Options{ReadOnly: cmd == "list"})
		switch {
		case err != nil && cmd == "list":
			fmt.Fprintf(stderr, "hosts: stored sizes unknown: %v\n", err)
		case err != nil:
			return withCode(exitConfig, err)
		default:
			defer s.Close()
			if err := migrateHosts(s, db, cmd == "list", stderr); err != nil {
				return withCode(exitData, err)
			}
		}
	}
	set := func(h *hostdb.Host) {
		if *addr != "" {
			h.Addr = *addr
		}
		if *group != "" {
			h.Group = *group
		}
		if *comment != "" {
			h.Comment = *comment
		}
		if *maxSize != "" {
			h.MaxSize = size
		}
		if *maxAge != "" {
			h.MaxAge = age
		}
		if secret != "" {
			h.Secret = hostauth.HashSecret(secret)
		}
	}
	hostSize := func(name string) int64 {
		if s == nil {
			return 0
		}
		return s.HostSize(name)
	}
	var name string
	if len(pos) > 1 {
		name = pos[1]
	}
	switch cmd {
	case "list":
		hosts := db.Hosts()
		if *asJSON {
			enc := json.NewEncoder(stdout)
			for _, h := range hosts {
				if err := enc.Encode(hostJSON(h, hostSize(h.Name))); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tGROUP\tADDRESS\tSECRET\tENABLED\tSIZE\tMAX SIZE\tMAX AGE\tLAST CONTACT\tCOMMENT")
		for _, h := range hosts {
			last := "-"
			if !h.LastContact.IsZero() {
				last = h.LastContact.Format(time.RFC3339)
			}
			maxSize, maxAge := "-", "-" // unset
			if h.MaxSize > 0 {
				maxSize = pipeline.ByteSize(h.MaxSize).String()
			}
			if h.MaxAge > 0 {
				maxAge = h.MaxAge.String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\t%d\t%s\t%s\t%s\t%s\n", h.Name, h.Group, h.Addr, h.Secret != "", !h.Disabled, hostSize(h.Name), maxSize, maxAge, last, h.Comment)
		}
		return tw.Flush()
	case "add":
		h := hostdb.Host{Name: name}
		set(&h)
		if _, err := db.Add(h, ""); err != nil {
			if errors.Is(err, hostdb.ErrHostExists) {
				return usagef("hosts add: %v (use set)", err)
			}
			return err
		}
		fmt.Fprintf(stdout, "added host %s\n", name)
	case "set", "enable", "disable":
		_, err := db.Update(name, func(h *hostdb.Host) error {
			set(h)
			switch cmd {
			case "enable":
				h.Disabled = false
			case "disable":
				h.Disabled = true
			}
			return nil
		})
		if err != nil {
			return withCode(exitData, err)
		}
		fmt.Fprintf(stdout, "%s host %s\n", map[string]string{"set": "updated", "enable": "enabled", "disable": "disabled"}[cmd], name)
	case "delete":
		err := db.Delete(name)
		if s != nil {
			// A host the table does not know may still have traces.
			if perr := s.DeletePartition(name); perr == nil || !errors.Is(perr, store.ErrNoHost) {
				err = perr
			}
		}
		if err != nil {
			return withCode(exitData, err)
		}
		fmt.Fprintf(stdout, "deleted host %s and its traces\n", name)
	default:
		return usagef("hosts: unknown command %q", cmd)
	}
	return nil
}

// migrateHosts carries the host records of a store written before the
// host table moved out of it into the table (as the store sink does when
// serve opens the store); readOnly only says they are there.
func migrateHosts(s *store.Store, db *hostdb.DB, readOnly bool, stderr io.Writer) error {
	legacy := s.LegacyHosts()
	if len(legacy) == 0 {
		return nil
	}
	if readOnly {
		fmt.Fprintf(stderr, "hosts: the store %s keeps %d host records of an older version; serve or a change with hosts carries them into the host table\n", s.Dir(), len(legacy))
		return nil
	}
	if _, err := db.Import(legacy); err != nil {
		return fmt.Errorf("store %s: carrying its host records into the host table %s: %w", s.Dir(), db.Dir(), err)
	}
	return s.DropLegacyHosts()
}

// hostJSON is a host as `hosts list --json` prints it (the secret as
// "set" or "": never its hash).
func hostJSON(h hostdb.Host, size int64) map[string]any {
	return map[string]any{"name": h.Name, "group": h.Group, "addr": h.Addr, "secret": h.Secret != "", "enabled": !h.Disabled,
		"size": size, "maxSize": h.MaxSize, "maxAge": h.MaxAge.String(), "lastContact": h.LastContact, "comment": h.Comment, "created": h.Created}
}
