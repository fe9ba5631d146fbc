// Package stream follows what a tracebridge bridge receives, from
// anywhere, in the spirit of JDK Flight Recorder's RemoteRecordingStream:
// open a stream on the NATS URL of a bridge's live stream (its embedded
// server, by default nats://127.0.0.1:14222, or the external server it
// publishes to), register handlers, and start it.
//
//	s, err := stream.Open("nats://127.0.0.1:14222", stream.Options{DataDir: stream.DefaultDataDir})
//	if err != nil { … }
//	defer s.Close()
//	s.OnMetadata(func(m *stream.Metadata) { fmt.Println(len(m.Types), "types") })
//	s.OnEvent("BeforeOperationEvent", func(e *stream.Event) {
//		sig, _ := e.Field("operationSignature")
//		fmt.Println(e.Host, sig.Str())
//	})
//	s.SetStartTime(time.Now().Add(-10 * time.Minute)) // the past, then live
//	err = s.Start(ctx)                                // until ctx ends or Close
//
// The metadata handler runs before the first event of every type, and
// again whenever types, hosts, receivers or the bridge's control
// settings change. Handlers are called from one goroutine, one at a
// time, in the order the bridge received the records (records of one
// connection keep their order). A handler that asks for some types only
// does not pay for decoding the others: the server filters by subject
// where it can, and the stream decodes only the messages of types that
// have a handler.
//
// The bridge's embedded server admits only clients with its credential
// (DATA_DIR/nats/credentials, USER:PASSWORD): Options.DataDir finds it
// for a server on loopback, Options.CredsFile names a copy elsewhere
// (see CredentialsFile, ReadCredentials).
//
// A subscriber reads the repository at its own pace and never slows the
// bridge; if the repository's retention removes records before it reads
// them, OnGap says how many it missed (OnError, without a gap handler).
//
// Dump writes a window of the repository as a Kieker log directory or as
// OTLP JSON; NewHandler serves the stream to browsers over a WebSocket.
//
// What a handler is given (an Event, its Record and values) is valid
// until the handler returns; Record.Clone keeps it.
package stream
