package probe_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/tracebridge/tracebridge/probe"
)

// Operations are registered once, typically as package-level variables.
var (
	opServe  = probe.NewOp("func (*shop.Server) Serve(context.Context, string) error", "shop.Server")
	opLookup = probe.NewOp("func (*shop.Catalog) Lookup(context.Context, string) (int, error)", "shop.Catalog")
)

func serve(ctx context.Context, item string) (err error) {
	defer probe.FromContext(ctx).EnterOp(opServe).ExitErr(&err)
	_, err = lookup(ctx, item)
	return err
}

func lookup(ctx context.Context, item string) (_ int, err error) {
	defer probe.FromContext(ctx).EnterOp(opLookup).ExitErr(&err)
	if item == "" {
		return 0, errors.New("empty item")
	}
	return 42, nil
}

func Example() {
	w, err := probe.NewWriter(probe.Config{Addr: "127.0.0.1:10133"})
	if err != nil {
		log.Fatal(err) // only an invalid configuration fails
	}
	defer func() {
		if err := w.Close(); err != nil {
			log.Print(err) // e.g. records dropped: the bridge was not there
		}
	}()

	for _, item := range []string{"book", ""} {
		t := w.StartTrace() // one trace per unit of work
		ctx := probe.WithTrace(context.Background(), t)
		if err := serve(ctx, item); err != nil {
			fmt.Println("serve:", err)
		}
	}
}
