package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrStreamFull: the stream refused a message because it holds
// Options.StreamMaxBytes (its DiscardNew policy): checkpoints are behind
// (the shared store unreachable, an owner missing). The publisher does
// not retry it; the receivers answer busy (OTLP 429 /
// RESOURCE_EXHAUSTED, ZICO no OK) until checkpoints purge the stream.
var ErrStreamFull = errors.New("the cluster's stream is full (cluster.stream_max_bytes): checkpoints are behind; records are refused until they catch up")

// jsStoreFailed is JetStream's error code of a message the stream did not
// store (JSStreamStoreFailedF), with the reason as its description.
const jsStoreFailed = 10077

// refusal is err, or ErrStreamFull (wrapping err) when the stream
// refused the message for its limits.
func refusal(err error) error {
	var ae *jetstream.APIError
	if errors.As(err, &ae) && ae.ErrorCode == jsStoreFailed &&
		(strings.Contains(ae.Description, "maximum bytes") || strings.Contains(ae.Description, "maximum messages")) {
		return fmt.Errorf("%w (%w)", ErrStreamFull, err)
	}
	return err
}

// Stream limits: near full from nearFull of StreamMaxBytes on (cluster
// status warns), full from full on.
const (
	nearFull = 0.8
	full     = 0.95
)

// streamConfig is the stream's configuration with the byte limit
// maxBytes (0: none).
func (n *Node) streamConfig(maxBytes int64) jetstream.StreamConfig {
	if maxBytes <= 0 {
		maxBytes = -1
	}
	maxAge := n.opt.StreamMaxAge
	if maxAge < 0 {
		maxAge = 0
	}
	return jetstream.StreamConfig{
		Name:        StreamName,
		Description: "tracebridge cluster: received trace records by partition, until their owner has them in blocks",
		Subjects:    []string{subjectPrefix + "*"},
		Storage:     jetstream.FileStorage,
		Replicas:    n.opt.Replicas,
		Retention:   jetstream.LimitsPolicy,
		// A full stream refuses new messages (their clients are not
		// acknowledged) rather than drop old ones not yet in blocks.
		Discard:     jetstream.DiscardNew,
		MaxBytes:    maxBytes,
		MaxAge:      maxAge,
		Duplicates:  2 * time.Minute,
		MaxMsgSize:  MaxMessage + 64<<10,
		Compression: jetstream.S2Compression,
	}
}

// streamMaxBytes is the byte limit the stream gets: Options.StreamMaxBytes
// when set; else half the JetStream storage of this node's embedded server
// (Options.StorageMax) or of the account's limit, keeping an existing
// stream's smaller limit (the nodes' servers differ: the smallest one
// bounds the stream, and nodes starting in turn do not undo each other's
// limit). cur is the existing stream's limit (≤ 0: none or no stream).
// 0: no limit known.
func (n *Node) streamMaxBytes(ctx context.Context, cur int64) int64 {
	if n.opt.StreamMaxBytes > 0 {
		return n.opt.StreamMaxBytes
	}
	auto := n.opt.StorageMax / 2
	if auto <= 0 {
		if ai, err := n.js.AccountInfo(ctx); err == nil && ai.Limits.MaxStore > 0 {
			auto = ai.Limits.MaxStore / 2
		}
	}
	switch {
	case auto <= 0:
		return max(cur, 0)
	case cur > 0 && cur < auto:
		return cur
	}
	return auto
}

// updateGrace is how long a starting node retries an update of the
// stream's configuration that fails before it goes on with the old one.
const updateGrace = 30 * time.Second

// ensureStream creates the stream, or updates an existing one whose
// configuration differs (a changed stream_max_bytes, stream_max_age or
// replicas).
func (n *Node) ensureStream(ctx context.Context) (jetstream.Stream, error) {
	var cur int64
	st, err := n.js.Stream(ctx, StreamName)
	switch {
	case err == nil:
		cur = st.CachedInfo().Config.MaxBytes
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("stream %s: %w", StreamName, err)
	}
	maxBytes := n.streamMaxBytes(ctx, cur)
	if maxBytes <= 0 && !n.warnedLimit {
		n.warnedLimit = true
		n.log.Warn("cluster: the stream has no byte limit (the NATS servers' storage is unknown to this node): while checkpoints fail it grows until the servers refuse it; set cluster.stream_max_bytes", "node", n.opt.Node)
	}
	cfg := n.streamConfig(maxBytes)
	if st == nil {
		st, err = n.js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// another node made it meanwhile: update it
			st, err = n.js.UpdateStream(ctx, cfg)
		}
	} else if c := st.CachedInfo().Config; c.MaxBytes != cfg.MaxBytes || c.MaxAge != cfg.MaxAge || c.Replicas != cfg.Replicas ||
		c.Discard != cfg.Discard || c.MaxMsgSize != cfg.MaxMsgSize || c.Duplicates != cfg.Duplicates {
		up, uerr := n.js.UpdateStream(ctx, cfg)
		if uerr != nil && time.Since(n.started) < updateGrace {
			return nil, fmt.Errorf("stream %s: updating its configuration: %w", StreamName, uerr)
		}
		if uerr != nil {
			// The stream works as it is: after updateGrace of retries,
			// ingest goes on with its old configuration rather than wait
			// for one the servers refuse (no room for the limit on a
			// replica, say).
			n.log.Warn("cluster: the stream's configuration was not updated; it keeps its old one", "node", n.opt.Node, "stream", StreamName,
				"max_bytes", cfg.MaxBytes, "max_age", cfg.MaxAge, "replicas", cfg.Replicas, "err", uerr)
			return st, nil
		}
		st = up
		n.log.Info("cluster: stream configuration updated", "node", n.opt.Node, "stream", StreamName,
			"max_bytes", cfg.MaxBytes, "max_age", cfg.MaxAge, "replicas", cfg.Replicas)
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", StreamName, err)
	}
	return st, nil
}

// sizeText writes bytes in binary units (1.5 GiB).
func sizeText(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
