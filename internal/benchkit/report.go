package benchkit

import (
	"io"
	"text/tabwriter"
)

// Table returns the writer of a results table: tab-separated cells,
// right-aligned, two spaces apart. The caller flushes it.
func Table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
}
