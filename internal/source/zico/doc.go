// Package zico receives traces from zorka 1.x agents: it is the server
// side of the ZICO 1.x protocol (package codec/zico has the wire format)
// with no knowledge of stores. A Handler decides who may log in (Hello)
// and commits what arrives (Data); the session replies OK to a DATA
// packet only after Data returned nil, so an OK means "committed", as it
// does with zico.
//
// # Use
//
//	srv, err := zico.NewServer(handler, zico.ServerConfig{}, zico.Settings{Logger: log})
//	ln, err := net.Listen("tcp", ":8640")
//	go srv.Serve(ln)              // returns ErrServerClosed after Shutdown
//	…
//	srv.Shutdown(ctx)             // finishes the frames in progress
//
// A Handler's Data gets the hostname of the session's HELLO and the
// traces of one packet, symbols resolved (see codec/zico for how a
// TraceRecord maps onto spans). Hello gets the HelloRequest (hostname,
// shared secret, agent clock) and the peer's address: return nil to
// accept, ErrAuth to refuse (AUTH_ERROR), ErrBadRequest, or ErrEOD. zico's
// security mode (known hosts only, fixed address, secret) is a Hello
// that checks them.
//
// # Protocol (ZICO.md §2)
//
//	PING (any payload)                PONG
//	HELLO, first object a HelloRequest  Hello hook: OK, or its reply and close;
//	                                  a null hostname: BAD_REQUEST and close
//	HELLO, another first object       BAD_REQUEST; open, an earlier login holds
//	DATA before a successful HELLO    AUTH_ERROR; open
//	DATA                              objects decoded in order, symbols
//	                                  registered, Data hook, then OK (or the
//	                                  hook's reply and close)
//	other type                        BAD_REQUEST; open
//	wrong magic byte                  BAD_REPLY, close
//	CRC mismatch                      CRC_ERROR, close
//	end of stream inside a frame      BAD_REQUEST, close
//	end at a frame start / in magic   EOD, close
//	payload ends inside an object     the objects before it count: Data, OK
//	Fressian error, wrong type        close, no reply; no hook called
//	length over Config.MaxPayload     BAD_REQUEST, close (zico: close)
//	negative length                   close, no reply
//	nothing received for IdleTimeout  close (30 s, zico's socket timeout)
//
// Hook errors other than the three sentinels are answered
// INTERNAL_ERROR and close the connection; zorka's agent then reconnects,
// says HELLO again and sends the whole batch again. A panic in a hook
// closes only its connection.
//
// # Goroutines, limits, shutdown
//
// Serve runs the accept loop on the caller's goroutine and one goroutine
// per connection; the hooks run on the connection's goroutine, one call at
// a time per connection, concurrently across connections. Each connection
// holds one frame buffer (grown with the bytes that arrive, up to
// MaxPayload; more than 1 MiB is released after the frame), one decoder's
// reusable memory (bounded by codec/zico.Limits) and its symbol table
// (MaxSymbols, MaxSymbolBytes). MaxConnections (1024) bounds the
// connections; one over the limit is closed at once.
//
// Shutdown stops accepting and lets every session finish the frame it is
// reading or handling (hook called, reply sent); sessions waiting for a
// frame end at once. If its context ends first, or on Close, connections
// are closed at once and the hooks' context is cancelled. Both are safe
// to call twice and without Serve.
//
// # Logging
//
// A connection that ends by a fault is logged once, at warning level,
// rate-limited (ServerConfig.LogRate lines a second, then a count), with
// the keys peer, session, host (after HELLO), offset (the stream offset
// of the offending byte: a frame's start, or inside a payload) and err.
// Idle timeouts and clean ends are logged at debug level. Nothing is
// logged per frame or per trace; Stats counts them.
package zico
