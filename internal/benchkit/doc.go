// Package benchkit holds what the benchmark programs share (bench/*,
// probe/bench, clients/c/bench): the body of main (Main: flags, a context
// cancelled by SIGINT or SIGTERM, the exit status), their flags (Flags:
// the usage line, comma-separated lists, every problem reported at once),
// starting the program itself again as a child process in a role
// (ChildCommand, Child), building tracebridge (Build, GoVersion), running
// `tracebridge serve` as a child process and asking its metrics endpoint
// how many records the receiver decoded or the sink consumed (Start,
// Bridge, PollStep), keeping the tail of a child's standard error (Tail),
// reading a process's memory and CPU time (Memory and CPU from /proc,
// Usage of a finished child, SettleDisk, SelfCPU), fetching Go profiles
// and printing their top functions (Fetch, Pprof), and generating Kieker
// Before/After events that form call trees (Signatures, Events, Recorder).
//
// The bridge configuration Start writes has one receiver named
// ReceiverName and one binary kieker-log sink named SinkName; the caller
// supplies the receiver's settings. SinkRecords fetches the metrics page
// uncompressed: gzipping it at every poll (every few milliseconds) cost
// the bridge a quarter of its CPU. PollStep spaces the polls so that a
// stop time is at most 0.5 % (or 2 ms) late without the polls loading a
// long run.
//
// Concurrency: a Bridge's methods may be called from one goroutine at a
// time, except Exited, WaitErr (after Exited is closed) and Stderr, which
// are safe from any. A Tail is safe for concurrent use. Events and
// Signatures are deterministic and share nothing.
package benchkit
