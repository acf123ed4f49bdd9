package validate

import (
	"fmt"
	"regexp"
	"strings"
	"text/template"

	adapterconfig "sigs.k8s.io/prometheus-adapter/pkg/config"
	"sigs.k8s.io/yaml"
)

var promLabelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// ValidateAdapterRules strictly decodes a prometheus-adapter rules file (the config.yaml the
// adapter reads with --config) into the adapter's own config types and checks what the
// adapter would refuse at start: metricsQuery templates that do not parse with its << >>
// delimiters, and resource overrides that name no resource. It returns the metric names the
// rules expose (name.as, or the series query when absent).
func ValidateAdapterRules(doc []byte) ([]string, error) {
	var cfg adapterconfig.MetricsDiscoveryConfig
	var errs []string
	if err := yaml.UnmarshalStrict(doc, &cfg); err != nil {
		// Report it, then check the rest on a lenient decoding.
		errs = append(errs, err.Error())
		cfg = adapterconfig.MetricsDiscoveryConfig{}
		if err := yaml.Unmarshal(doc, &cfg); err != nil {
			return nil, err
		}
	}
	var names []string
	check := func(kind string, i int, r adapterconfig.DiscoveryRule) {
		where := fmt.Sprintf("%s[%d]", kind, i)
		if strings.TrimSpace(r.SeriesQuery) == "" {
			errs = append(errs, where+": seriesQuery is required")
		}
		if r.MetricsQuery != "" {
			if _, err := template.New(where).Delims("<<", ">>").Parse(r.MetricsQuery); err != nil {
				errs = append(errs, fmt.Sprintf("%s: metricsQuery: %v", where, err))
			}
		}
		if r.Resources.Template != "" {
			if _, err := template.New(where).Delims("<<", ">>").Parse(r.Resources.Template); err != nil {
				errs = append(errs, fmt.Sprintf("%s: resources.template: %v", where, err))
			}
		}
		for label, o := range r.Resources.Overrides {
			if !promLabelName.MatchString(label) {
				errs = append(errs, fmt.Sprintf("%s: override label %q is not a Prometheus label name", where, label))
			}
			if o.Resource == "" {
				errs = append(errs, fmt.Sprintf("%s: override %q names no resource", where, label))
			}
		}
		names = append(names, r.Name.As)
	}
	for i, r := range cfg.Rules {
		check("rules", i, r)
	}
	for i, r := range cfg.ExternalRules {
		check("externalRules", i, r)
	}
	if len(errs) > 0 {
		return names, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return names, nil
}
