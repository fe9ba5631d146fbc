// Package mapping loads the user's KDB mapping files (`id=class` lines,
// internal/codec/kdb parses them): the one place that reads them from
// disk, for the receivers, the forward sink and the commands.
package mapping

import (
	"fmt"
	"os"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Load reads the mapping file at path, or returns the default mapping of
// common Kieker types when path is empty. Errors name the file, line and
// reason and wrap pipeline.ErrMapping (KDB's exit code 1).
func Load(path string, cat *record.Catalog) (*kdb.Mapping, error) {
	if path == "" {
		m, err := kdb.DefaultMapping(cat)
		return m, pipeline.Classify(pipeline.ErrMapping, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrMapping, fmt.Errorf("mapping file: %w", err))
	}
	defer f.Close()
	m, err := kdb.ParseMapping(path, f, cat)
	return m, pipeline.Classify(pipeline.ErrMapping, err)
}
