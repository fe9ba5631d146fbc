package jfr

import (
	"context"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// TypeFilter returns a consumer handing on to next only the records whose
// type matches the patterns (the ones of Config.Types: names, names
// without package, globs), for records a Source did not filter while
// decoding (those of a Kieker log of JFR events). Without patterns it is
// next itself. The consumer runs on one goroutine at a time.
func TypeFilter(patterns []string, next pipeline.Consumer) (pipeline.Consumer, error) {
	match, err := codec.NewFilter(patterns...)
	if err != nil {
		return nil, err
	}
	if match == nil {
		return next, nil
	}
	keep := map[*record.Type]bool{}
	var sub record.Batch
	return pipeline.ConsumerFunc(func(ctx context.Context, b *record.Batch) error {
		sub.Records = sub.Records[:0]
		sub.Origin = b.Origin
		for i := range b.Records {
			t := b.Records[i].Type
			k, ok := keep[t]
			if !ok {
				k = match(t.Name)
				keep[t] = k
			}
			if k {
				sub.Records = append(sub.Records, b.Records[i])
			}
		}
		if len(sub.Records) == 0 {
			return nil
		}
		err := next.Consume(ctx, &sub)
		clear(sub.Records)
		return err
	}), nil
}
