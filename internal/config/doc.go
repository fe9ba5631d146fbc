// Package config holds what a user sets: the YAML configuration of
// receivers, stages and sinks, and the mapping of KDB's command-line flags
// and Kieker's monitoring properties files onto it.
package config
