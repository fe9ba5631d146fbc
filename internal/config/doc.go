// Package config holds what a user sets for `tracebridge serve`: the YAML
// configuration with the bridge's own settings and a list of receivers,
// stages and sinks. Each component's own keys are decoded by its factory
// (internal/pipeline) into the component's configuration struct; this
// package checks that every key is known and names the one that is not.
package config
