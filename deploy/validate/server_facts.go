package validate

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// ServerFacts are the server's side of the contract the manifests rely on, read from its
// sources so that a renamed flag or metric breaks this check instead of a rollout.
type ServerFacts struct {
	// Flags are the `serve` flag names (packages/server/src/config/flags.ts).
	Flags map[string]bool
	// Metrics are the Prometheus metric names the server exports
	// (packages/server/src/observability/*.ts).
	Metrics map[string]bool
}

var (
	flagEntry   = regexp.MustCompile(`(?m)^  ([a-z][a-z0-9_]*): \{`)
	metricName  = regexp.MustCompile(`'(visionserve_[a-z0-9_]+)'`)
	metricQuery = regexp.MustCompile(`\bvisionserve_[a-z0-9_]+`)
)

// LoadServerFacts reads the flags and metric names from the repository at root.
func LoadServerFacts(root string) (*ServerFacts, error) {
	flagsTS, err := os.ReadFile(filepath.Join(root, "packages/server/src/config/flags.ts"))
	if err != nil {
		return nil, err
	}
	// The metric definitions live in several files of observability/ (TF Serving's names, ours,
	// the scrape-time collectors): every .ts file there is read.
	observability := filepath.Join(root, "packages/server/src/observability")
	entries, err := os.ReadDir(observability)
	if err != nil {
		return nil, err
	}
	var metricsTS []byte
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".ts" {
			continue
		}
		text, err := os.ReadFile(filepath.Join(observability, e.Name()))
		if err != nil {
			return nil, err
		}
		metricsTS = append(metricsTS, text...)
	}
	f := &ServerFacts{Flags: map[string]bool{}, Metrics: map[string]bool{}}
	for _, m := range flagEntry.FindAllStringSubmatch(string(flagsTS), -1) {
		f.Flags[m[1]] = true
	}
	for _, m := range metricName.FindAllStringSubmatch(string(metricsTS), -1) {
		f.Metrics[m[1]] = true
	}
	// Sanity: the parsers still understand the sources.
	for _, must := range []string{"model_base_path", "model_config_file", "rest_api_port", "shutdown_grace_ms"} {
		if !f.Flags[must] {
			return nil, fmt.Errorf("flags.ts: flag %q not found (%d flags parsed): update server_facts.go", must, len(f.Flags))
		}
	}
	for _, must := range []string{"visionserve_requests_in_flight", "visionserve_queue_depth"} {
		if !f.Metrics[must] {
			return nil, fmt.Errorf("observability/*.ts: metric %q not found (%d parsed): update server_facts.go", must, len(f.Metrics))
		}
	}
	return f, nil
}

// UnknownMetrics returns the visionserve_* names in a PromQL query (or series selector) that
// the server does not export. Histogram series suffixes are accepted.
func (f *ServerFacts) UnknownMetrics(query string) []string {
	var out []string
	for _, name := range metricQuery.FindAllString(query, -1) {
		if f.Metrics[name] {
			continue
		}
		base := regexp.MustCompile(`_(bucket|sum|count)$`).ReplaceAllString(name, "")
		if !f.Metrics[base] {
			out = append(out, name)
		}
	}
	return out
}
