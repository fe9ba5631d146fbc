// Package bridgetest is the harness of the end-to-end tests that run the
// real tracebridge binary: the Go tests of cmd/tracebridge, probe and the
// monitoring clients in clients/.
//
// It builds programs of this module once per test process (Build, Binary)
// into a temporary directory that Run removes when the tests are done, so
// a package that uses it has
//
//	func TestMain(m *testing.M) { os.Exit(bridgetest.Run(m)) }
//
// Start runs `tracebridge serve` and waits for its "tracebridge: ready"
// line; the Process it returns knows the addresses its receivers printed,
// the directory of its first Kieker log sink and its metrics address, and
// keeps everything it wrote to stdout and stderr. Stop ends it with SIGTERM
// and checks for a clean exit, Kill ends it with SIGKILL; a test's cleanup
// kills what is still running. ReadLog reads a Kieker log back.
//
// Exec runs a client program to its end and keeps its output. The spec
// functions (EncodeSpec, RandomSpec, DecodeSpec, EncoderRoundTrip) handle
// records written as JSON maps, the format in which the clients' tests
// describe the records their encoders must produce; CallTrees and
// ParseAccount compare the traces in a log with what an example program
// says it executed. Traces runs `tracebridge traces --json` on a log and
// returns the assembled trees (Assembled.Paths); CheckInvocations,
// WithoutMetadataLinks and Assemble check the InvocationRecords a client
// sent and that they alone link its tasks. CheckTasks checks the run of a
// client's tasks example (a thread pool and remote calls) against the
// paths the programs printed (PrintedPaths).
//
// Concurrency: Build, Binary and Run may be called from any goroutine. A
// Process's Stdout, Stderr and Receivers may be read from any goroutine;
// its Stop, Wait and Kill, like every function that takes a testing.TB,
// belong to the goroutine running the test.
package bridgetest
