// Package jfr reads JDK Flight Recorder data as a source: a recording file
// (.jfr), a JVM's repository directory (its chunk files, in order), or a
// repository root holding the directories of one or more JVMs
// (-XX:FlightRecorderOptions:repository=DIR gives DIR/<time>_<pid>/). It
// decodes with internal/codec/jfr and hands the events on as records in
// batches; the package comment of internal/codec/jfr gives the record
// layout.
//
// # Reading and following
//
// Without Follow, Run reads what the path holds and returns: every chunk
// of a file; every chunk file of a directory in the order of their start
// times; every JVM directory of a root in the order they were created. A
// chunk the JVM is still writing is read up to the last complete flush.
//
// With Follow, Run reads while JVMs write, until its context ends. Every
// PollInterval it lists the root and each JVM directory and re-reads the
// header of the chunk being read, following the JVM's update protocol
// (internal/codec/jfr.ReadHeader): what a header vouches for is complete,
// so a half-written event is never read. When a chunk is finished it moves
// to the chunk with the next larger start time. A new JVM directory (a
// restarted JVM, or a second JVM sharing the repository) becomes a stream
// of its own, read from its beginning; a root that does not exist yet is
// waited for. Config.Start says where following begins for the data that
// exists when Run starts: StartNewest (the default) skips it and reads
// what the JVMs write from then on, StartBeginning reads it all first.
// Chunks and directories that appear later are always read from their
// beginning.
//
// A JVM that exits deletes its directory. The source lists each followed
// directory on every poll and holds new chunk files open as soon as it sees
// them (up to 16 a directory), so the chunk being read and the ones begun
// before the exit stay readable and are read to their end. A JVM killed with
// SIGKILL leaves a chunk that never finishes: once it has not grown for
// StaleAfter and the process (the pid at the end of the directory's name)
// is gone, the reader reads what it holds and leaves the directory alone
// from then on.
//
// # In serve
//
// Factory builds the jfr receiver (YAML {type: jfr, repository: DIR,
// types: [...], host: NAME, start: newest|beginning}): a following Source.
// Every batch holds the records of one JVM directory (or file) and carries
// its origin: Peer the directory, Host the configured host (the receiver's
// default: this machine's name), Session the JVM's pid from the directory
// name. After its context ends, Run hands on what it has read (with a
// context that is not cancelled) and returns. Detect tells the commands
// whether a path holds JFR data.
//
// # Errors
//
// A damaged chunk (truncated, corrupt metadata or constant pools, an
// unsupported version, absurd sizes) is reported with the file, the
// offset and the reason to Settings.OnError, or logged (rate-limited)
// when that is nil, and counted; the reader goes on with the next chunk.
// Run returns an error only when the path cannot be read at all (without
// Follow), or when the consumer fails.
//
// # Memory
//
// Per JVM directory: the constant pools of the chunk being read and of
// the one before it (bounded by codec Limits.MaxPoolBytes), one read
// window and the compiled event types. One batch is filled at a time and
// handed on when it holds BatchSize records, and at the end of every poll.
//
// # Concurrency
//
// Run works on the caller's goroutine and starts none. Stats may be called
// from any goroutine.
package jfr
