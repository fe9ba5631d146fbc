// Package mqtt is the bridge's MQTT receiver: it subscribes to a topic of
// an MQTT broker (Mosquitto, the embedded broker's MQTT listener, …) with
// QoS 1 and a persistent session, decodes each message as KDB text or
// binary, and acknowledges (PUBACK) a message only once its records are
// durable in every sink (see internal/source/broker).
//
// # Delivery
//
// With a persistent session (clean session off, a fixed client id) the
// broker keeps QoS 1 messages published while the bridge is away and
// delivers them when it reconnects; messages published before the bridge's
// first subscription are not kept (MQTT semantics).
//
// MQTT has no negative acknowledgement: a message the broker sent stays
// unacknowledged, taking a place in the broker's in-flight window, until
// the session connects again. So when a sink refuses a batch the receiver
// drops the connection and connects again with the same session, after a
// back-off (BackoffMin doubling to BackoffMax, reset once a message is
// acknowledged), and the broker delivers everything unacknowledged again.
// Messages held for the next batch are dropped then (they come again
// too), as are messages still arriving through the abandoned connection;
// acknowledgements of messages of a connection that is gone are dropped by
// paho, and those messages come again. Delivery is at least once: records
// may arrive twice.
//
// Stopping acknowledges everything the sinks made durable, then
// disconnects. The broker reads those acknowledgements before it closes
// the connection; a new connection of the same session that comes first
// takes the session over, and what the broker had not read yet is lost
// with the old connection: those messages come again. Mosquitto saving
// its state after every change (autosave_on_changes) reads slowly enough
// on a busy machine for a quick restart of the receiver to see this
// (TestMosquittoRestartWithMessagesInFlight waits for the broker to close
// the old connection).
//
// When the broker goes away paho reconnects (capped back-off, state
// changes logged once each). A broker with persistence delivers the
// messages that were in flight again after a restart; Mosquitto saves its
// state on a clean stop (SIGTERM) and every autosave_interval, so a crash
// loses what changed since the last save.
//
// # Throughput and the broker's limits
//
// A message is acknowledged after the bridge's next flush (its
// AckInterval), and the broker sends only so many unacknowledged messages
// at a time: Mosquitto's max_inflight_messages, 20 by default (Mosquitto
// 2.0.11, measured: a subscriber that acknowledges nothing gets exactly 20;
// once acknowledgements flow it may send many more at a time). The
// receiver therefore hands its batch on as soon as Inflight messages are
// unacknowledged rather than waiting for Batch.MaxDelay; set Inflight to the
// broker's max_inflight_messages (-1 when that is 0, no limit).
//
// What the broker cannot send yet waits in the client's queue, bounded by
// max_queued_messages (default 1000) and max_queued_bytes (default 0, no
// limit). Messages that do not fit are dropped by the broker, silently: a
// QoS 1 publisher still gets its PUBACK. The same queue holds what arrives
// while the bridge is stopped.
//
// Measured on this project's 2-core machine (private Mosquitto 2.0.11 with
// its default limits, the bridge acknowledging within 20 ms): the receiver
// drains a backlog of 1000 messages at 10,500 to 14,500 messages/s with
// Inflight 20 and about 9,500 without (BenchmarkMosquittoDrain; noisy). A
// burst of 5000 messages published in 100 to 200 ms (25,000 to 50,000/s)
// is faster than that: what is neither in flight nor among the 1000 queued
// is dropped, and only 1,000 to 2,500 of the 5000 arrive. With
// max_inflight_messages 10000, or max_queued_messages 10000, all 5000
// arrive, in about the time it takes to publish them
// (TestBurstWithBrokerLimitsRaised).
//
// So for bursts, configure Mosquitto (mosquitto.conf) with
//
//	max_inflight_messages N   # N ≥ the largest burst, or 0 for no limit;
//	                          # set the receiver's Inflight to match (-1 for 0)
//	max_queued_messages Q     # Q ≥ what may pile up while the bridge is slow
//	                          # or stopped (0: no limit) …
//	max_queued_bytes B        # … bounded in memory by B bytes per client
//
// and turn persistence on if queued and in-flight messages must survive a
// broker restart.
//
// Concurrency: Run owns one goroutine; paho's goroutines hand it messages
// through a channel; acknowledgements come from the bridge's flush
// goroutine (paho's Message.Ack is safe for that).
package mqtt
