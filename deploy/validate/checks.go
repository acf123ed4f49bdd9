package validate

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The project's own rules, beyond the API schemas: the manifests must agree with the server
// (flags, ports, probe paths, drain budget, metric names, files they point at) and with each
// other (selectors, scale targets, runtimes). Each returns messages naming the object.

// ServerArgs are the `--flag=value` arguments of a visionserve container.
type ServerArgs map[string]string

const (
	defaultGRPCPort       = 8500
	defaultRESTPort       = 8501
	defaultSageMakerPort  = 8080
	defaultShutdownGrace  = 10_000
	defaultTerminationSec = 30
	kserveModelDir        = "/mnt/models"
	kserveHTTPPort        = 8080
	defaultInflightBytes  = 512 << 20
	// The server's own resident set with models loaded (docs/scaling.md: ~250-340 MiB).
	minResidentBytes = 384 << 20
)

// ParseServerArgs reads a container's args: "serve" first, then --flag=value only (the
// unambiguous form), each flag known to the server and given once.
func ParseServerArgs(c corev1.Container, facts *ServerFacts) (ServerArgs, []string) {
	var errs []string
	if len(c.Command) > 0 {
		errs = append(errs, fmt.Sprintf("container %s: command is set; the image's entrypoint runs the CLI", c.Name))
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		return nil, append(errs, fmt.Sprintf("container %s: args must start with serve", c.Name))
	}
	args := ServerArgs{}
	for _, a := range c.Args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			errs = append(errs, fmt.Sprintf("container %s: argument %q: use --flag=value", c.Name, a))
			continue
		}
		if !facts.Flags[name] {
			errs = append(errs, fmt.Sprintf("container %s: unknown server flag --%s", c.Name, name))
		}
		if _, dup := args[name]; dup {
			errs = append(errs, fmt.Sprintf("container %s: --%s given twice", c.Name, name))
		}
		args[name] = value
	}
	return args, errs
}

func (a ServerArgs) intFlag(name string, def int) (int, error) {
	v, ok := a[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("--%s=%s is not an integer", name, v)
	}
	return n, nil
}

// Listeners maps each enabled listener port to its kind: grpc, rest, sagemaker.
func (a ServerArgs) Listeners() (map[int]string, error) {
	out := map[int]string{}
	for _, l := range []struct {
		flag, kind string
		def        int
	}{{"port", "grpc", defaultGRPCPort}, {"rest_api_port", "rest", defaultRESTPort}, {"sagemaker_port", "sagemaker", defaultSageMakerPort}} {
		p, err := a.intFlag(l.flag, l.def)
		if err != nil {
			return nil, err
		}
		if p > 0 {
			out[p] = l.kind
		}
	}
	return out, nil
}

// DrainBudgetMs is how long the server may take from SIGTERM to exit: the readiness delay
// plus the grace for in-flight requests.
func (a ServerArgs) DrainBudgetMs() (delay, total int, err error) {
	delay, err = a.intFlag("shutdown_readiness_delay_ms", 0)
	if err != nil {
		return 0, 0, err
	}
	grace, err := a.intFlag("shutdown_grace_ms", defaultShutdownGrace)
	if err != nil {
		return 0, 0, err
	}
	return delay, delay + grace, nil
}

// podContext is what a container's checks need from around it.
type podContext struct {
	where       string
	annotations map[string]string // pod annotations (ServingRuntime: spec.annotations)
	volumes     []corev1.Volume
	configMaps  map[string]corev1.ConfigMap
	// terminationSec is the pod's terminationGracePeriodSeconds (nil: not settable here).
	terminationSec *int64
	// extraMounts are directories the platform provides (KServe's /mnt/models).
	extraMounts []string
}

var (
	readinessPaths = map[string]map[string]bool{
		"rest":      {"/readyz": true, "/v2/health/ready": true},
		"sagemaker": {"/readyz": true, "/ping": true},
	}
	livenessPaths = map[string]bool{"/healthz": true, "/v2/health/live": true}
	basePathEntry = regexp.MustCompile(`base_path:\s*['"]([^'"]+)['"]`)
	metricsPathRe = regexp.MustCompile(`path:\s*"([^"]+)"`)
	annotationRef = regexp.MustCompile(`^metadata\.annotations\['([^']+)'\]$`)
)

// checkServerContainer checks one visionserve container in its pod.
func checkServerContainer(c corev1.Container, pod podContext, facts *ServerFacts) (ServerArgs, []string) {
	args, errs := ParseServerArgs(c, facts)
	if args == nil {
		return nil, prefix(pod.where, errs)
	}
	fail := func(format string, v ...any) { errs = append(errs, fmt.Sprintf(format, v...)) }

	listeners, err := args.Listeners()
	if err != nil {
		return args, prefix(pod.where, append(errs, err.Error()))
	}
	portByName := map[string]int{}
	for _, p := range c.Ports {
		if _, ok := listeners[int(p.ContainerPort)]; !ok {
			fail("containerPort %d (%s) is not a port the server listens on (%v)", p.ContainerPort, p.Name, listeners)
		}
		if p.Name != "" {
			portByName[p.Name] = int(p.ContainerPort)
		}
	}
	resolve := func(p intstr.IntOrString) int {
		if p.Type == intstr.String {
			return portByName[p.StrVal]
		}
		return int(p.IntVal)
	}

	probe := func(kind string, pr *corev1.Probe, ok func(listener, path string) bool) {
		if pr == nil {
			fail("no %s probe", kind)
			return
		}
		if pr.HTTPGet == nil {
			fail("%s probe: use httpGet on the REST port", kind)
			return
		}
		port := resolve(pr.HTTPGet.Port)
		listener := listeners[port]
		if !ok(listener, pr.HTTPGet.Path) {
			fail("%s probe: GET %s on port %s (%s listener) is not a %s endpoint of the server", kind, pr.HTTPGet.Path, pr.HTTPGet.Port.String(), listener, kind)
		}
	}
	readyOK := func(l, p string) bool { return readinessPaths[l][p] }
	probe("readiness", c.ReadinessProbe, readyOK)
	probe("liveness", c.LivenessProbe, func(l, p string) bool { return (l == "rest" || l == "sagemaker") && livenessPaths[p] })
	if c.StartupProbe != nil {
		probe("startup", c.StartupProbe, readyOK)
	}

	// Drain: SIGTERM turns /readyz to 503 at once; the listeners keep serving for the delay,
	// which must outlast the time a prober needs to see the 503, then drain within the grace;
	// the kubelet must not SIGKILL before that.
	delay, budget, err := args.DrainBudgetMs()
	if err != nil {
		fail("%v", err)
	}
	if rp := c.ReadinessProbe; rp != nil {
		period, threshold := int32(10), int32(3) // the API's defaults
		if rp.PeriodSeconds > 0 {
			period = rp.PeriodSeconds
		}
		if rp.FailureThreshold > 0 {
			threshold = rp.FailureThreshold
		}
		if need := int(period*threshold) * 1000; delay < need {
			fail("--shutdown_readiness_delay_ms=%d is shorter than the readiness probe needs to see the 503 (%d ms)", delay, need)
		}
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		budget += int(c.Lifecycle.PreStop.Sleep.Seconds) * 1000
	}
	termSec := int64(defaultTerminationSec)
	if pod.terminationSec != nil {
		termSec = *pod.terminationSec
	}
	if termSec*1000 < int64(budget)+1000 {
		fail("terminationGracePeriodSeconds %d does not cover the drain (readiness delay + grace = %d ms, plus 1 s)", termSec, budget)
	}

	// CPU: Node reports the node's cores, not the pod's request, so the instances must be set
	// and fit the request.
	instances, err1 := args.intFlag("model_instances", 0)
	intra, err2 := args.intFlag("tensorflow_intra_op_parallelism", 1)
	if err1 != nil || err2 != nil {
		fail("%v %v", err1, err2)
	} else if instances <= 0 {
		fail("--model_instances must be set: without it the server starts one instance per node core")
	} else if req, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
		fail("no CPU request")
	} else if cores := int(math.Ceil(req.AsApproximateFloat64())); instances*max(intra, 1) > cores {
		fail("--model_instances=%d x %d threads need more than the %s CPU requested", instances, max(intra, 1), req.String())
	}
	if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
		fail("no memory request")
	}
	if limit, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		fail("no memory limit")
	} else if budget, err := args.intFlag("max_inflight_request_bytes", defaultInflightBytes); err != nil {
		fail("%v", err)
	} else if limit.Value() < int64(budget)+minResidentBytes {
		fail("memory limit %s leaves less than %d MiB beside --max_inflight_request_bytes=%d (request bodies held at once)", limit.String(), minResidentBytes>>20, budget)
	}

	// Files and directories the flags name must be mounted; config files must exist in their
	// ConfigMap or downward API volume.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	fileContent := func(flag, p string) (string, bool) {
		for mp, m := range mounts {
			rel, ok := strings.CutPrefix(p, strings.TrimSuffix(mp, "/")+"/")
			if !ok {
				continue
			}
			vol := findVolume(pod.volumes, m.Name)
			switch {
			case vol == nil:
				fail("--%s: volume %q is not in the pod", flag, m.Name)
			case vol.ConfigMap != nil:
				cm, known := pod.configMaps[vol.ConfigMap.Name]
				if !known {
					return "", false // not in this manifest set (created separately)
				}
				content, ok := cm.Data[rel]
				if !ok {
					fail("--%s=%s: ConfigMap %s has no key %q", flag, p, vol.ConfigMap.Name, rel)
				}
				return content, ok
			case vol.DownwardAPI != nil:
				for _, it := range vol.DownwardAPI.Items {
					if it.Path != rel {
						continue
					}
					if it.FieldRef == nil {
						return "", false
					}
					ref := annotationRef.FindStringSubmatch(it.FieldRef.FieldPath)
					if ref == nil {
						return "", false
					}
					content, ok := pod.annotations[ref[1]]
					if !ok {
						fail("--%s=%s: annotation %q is not set on the pod", flag, p, ref[1])
					}
					return content, ok
				}
				fail("--%s=%s: downward API volume %q has no item %q", flag, p, m.Name, rel)
			}
			return "", false
		}
		fail("--%s=%s is not inside a mounted volume", flag, p)
		return "", false
	}
	underMount := func(what, p string) {
		for mp := range mounts {
			if p == mp || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/") {
				return
			}
		}
		for _, mp := range pod.extraMounts {
			if p == mp || strings.HasPrefix(p, mp+"/") {
				return
			}
		}
		fail("%s %s is not inside a mounted volume", what, p)
	}
	for _, flag := range []string{"batching_parameters_file", "ssl_config_file", "admin_token_file"} {
		if p, ok := args[flag]; ok {
			fileContent(flag, p)
		}
	}
	if p, ok := args["model_config_file"]; ok {
		if content, ok := fileContent("model_config_file", p); ok {
			for _, m := range basePathEntry.FindAllStringSubmatch(content, -1) {
				if path.IsAbs(m[1]) {
					underMount("model config base_path", m[1])
				}
			}
		}
	}
	if p, ok := args["model_base_path"]; ok {
		underMount("--model_base_path", p)
	}
	if roots, ok := args["model_roots"]; ok {
		for _, r := range strings.Split(roots, ":") {
			underMount("--model_roots entry", r)
		}
	}
	if p, ok := args["monitoring_config_file"]; ok {
		if content, ok := fileContent("monitoring_config_file", p); ok {
			metricsPath := "/monitoring/prometheus/metrics"
			if m := metricsPathRe.FindStringSubmatch(content); m != nil {
				metricsPath = m[1]
			}
			for _, key := range []string{"prometheus.io/path", "prometheus.kserve.io/path"} {
				if v, ok := pod.annotations[key]; ok && v != metricsPath {
					fail("annotation %s=%s, but the server serves metrics at %s", key, v, metricsPath)
				}
			}
			for _, key := range []string{"prometheus.io/port", "prometheus.kserve.io/port"} {
				if v, ok := pod.annotations[key]; ok {
					p, _ := strconv.Atoi(v)
					if l := listeners[p]; l != "rest" && l != "sagemaker" {
						fail("annotation %s=%s is not an HTTP port of the server (metrics are on the REST and SageMaker ports)", key, v)
					}
				}
			}
		}
	}
	return args, prefix(pod.where, errs)
}

func findVolume(vols []corev1.Volume, name string) *corev1.Volume {
	for i := range vols {
		if vols[i].Name == name {
			return &vols[i]
		}
	}
	return nil
}

func prefix(where string, errs []string) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = where + ": " + e
	}
	return out
}

func isServerContainer(c corev1.Container) bool {
	return len(c.Args) > 0 && c.Args[0] == "serve"
}

// CheckObjects runs the project's rules over one manifest set.
func CheckObjects(o *Objects, facts *ServerFacts) []string {
	var errs []string
	configMaps := map[string]corev1.ConfigMap{}
	for _, cm := range o.ConfigMaps {
		configMaps[cm.Name] = cm
	}

	deployments := map[string]labels.Set{}
	for _, d := range o.Deployments {
		where := "Deployment " + d.Name
		tpl := d.Spec.Template
		deployments[d.Name] = tpl.Labels
		sel, err := metav1LabelSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(tpl.Labels)) {
			errs = append(errs, where+": selector does not match the pod template labels")
		}
		found := false
		for _, c := range tpl.Spec.Containers {
			if !isServerContainer(c) {
				continue
			}
			found = true
			_, e := checkServerContainer(c, podContext{
				where: where, annotations: tpl.Annotations, volumes: tpl.Spec.Volumes,
				configMaps: configMaps, terminationSec: tpl.Spec.TerminationGracePeriodSeconds,
			}, facts)
			errs = append(errs, e...)
		}
		if !found {
			errs = append(errs, where+": no visionserve container (args starting with serve)")
		}
	}
	matchesDeployment := func(sel labels.Selector) bool {
		for _, l := range deployments {
			if sel.Matches(l) {
				return true
			}
		}
		return false
	}
	for _, s := range o.Services {
		if !matchesDeployment(labels.SelectorFromSet(s.Spec.Selector)) {
			errs = append(errs, "Service "+s.Name+": selector matches no Deployment's pods")
		}
		for _, p := range s.Spec.Ports {
			if p.TargetPort.Type == intstr.String && !deploymentHasPortName(o, p.TargetPort.StrVal) {
				errs = append(errs, fmt.Sprintf("Service %s: targetPort %q is no container port name", s.Name, p.TargetPort.StrVal))
			}
		}
	}
	for _, p := range o.PDBs {
		sel, err := metav1LabelSelector(p.Spec.Selector)
		if err != nil || !matchesDeployment(sel) {
			errs = append(errs, "PodDisruptionBudget "+p.Name+": selector matches no Deployment's pods")
		}
	}
	scaled := map[string]string{}
	target := func(who, kind, name string) {
		if kind != "Deployment" && kind != "" { // KEDA's default kind is Deployment
			errs = append(errs, who+": scale target is not a Deployment")
		} else if _, ok := deployments[name]; !ok {
			errs = append(errs, who+": scale target Deployment "+name+" is not in this manifest set")
		}
		if prev, ok := scaled[name]; ok {
			errs = append(errs, fmt.Sprintf("%s and %s both scale Deployment %s", prev, who, name))
		}
		scaled[name] = who
	}
	for _, h := range o.HPAs {
		target("HorizontalPodAutoscaler "+h.Name, h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name)
		for _, m := range h.Spec.Metrics {
			if m.Pods != nil {
				errs = append(errs, unknownMetricErrs("HorizontalPodAutoscaler "+h.Name, m.Pods.Metric.Name, facts)...)
			}
		}
	}
	for _, s := range o.ScaledObjects {
		who := "ScaledObject " + s.Metadata.Name
		target(who, s.Spec.ScaleTargetRef.Kind, s.Spec.ScaleTargetRef.Name)
		for _, t := range s.Spec.Triggers {
			if t.Type == "prometheus" {
				errs = append(errs, unknownMetricErrs(who, t.Metadata["query"], facts)...)
			}
		}
	}
	errs = append(errs, checkKServe(o, facts)...)
	return errs
}

func deploymentHasPortName(o *Objects, name string) bool {
	for _, d := range o.Deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == name {
					return true
				}
			}
		}
	}
	return false
}

func unknownMetricErrs(who, query string, facts *ServerFacts) []string {
	var errs []string
	for _, m := range facts.UnknownMetrics(query) {
		errs = append(errs, fmt.Sprintf("%s: metric %s is not exported by the server", who, m))
	}
	return errs
}

// runtimeInfo is what InferenceServices and TrainedModels are checked against.
type runtimeInfo struct {
	args        ServerArgs
	multiModel  bool
	protocols   []string
	drainBudget int
}

func checkKServe(o *Objects, facts *ServerFacts) []string {
	var errs []string
	runtimes := map[string]runtimeInfo{}
	for _, r := range o.Runtimes {
		where := r.Kind + " " + r.Metadata.Name
		info := runtimeInfo{multiModel: r.Spec.MultiModel != nil && *r.Spec.MultiModel, protocols: r.Spec.ProtocolVersions}
		for _, p := range r.Spec.ProtocolVersions {
			if !slices.Contains([]string{"v1", "v2", "grpc-v1", "grpc-v2"}, p) {
				errs = append(errs, fmt.Sprintf("%s: protocol version %q is not one KServe knows", where, p))
			}
		}
		onnx := false
		for _, f := range r.Spec.SupportedModelFormats {
			onnx = onnx || f.Name == "onnx"
		}
		if !onnx {
			errs = append(errs, where+": does not declare the onnx model format")
		}
		if len(r.Spec.Containers) != 1 || r.Spec.Containers[0].Name != "kserve-container" {
			errs = append(errs, where+": needs exactly one container, named kserve-container")
			continue
		}
		c := r.Spec.Containers[0]
		// KServe substitutes {{.Name}} with the InferenceService's name.
		args, e := checkServerContainer(c, podContext{
			where: where, annotations: r.Spec.Annotations, volumes: r.Spec.Volumes,
			extraMounts: []string{kserveModelDir},
		}, facts)
		errs = append(errs, e...)
		if args == nil {
			continue
		}
		info.args = args
		_, info.drainBudget, _ = args.DrainBudgetMs()
		if rest, _ := args.intFlag("rest_api_port", defaultRESTPort); rest != kserveHTTPPort {
			errs = append(errs, fmt.Sprintf("%s: --rest_api_port must be %d (KServe's ingress and model agent use it)", where, kserveHTTPPort))
		}
		if info.multiModel {
			if args["kserve_model_control_mode"] != "explicit" {
				errs = append(errs, where+": multi-model needs --kserve_model_control_mode=explicit (the agent loads models)")
			}
			if !slices.Contains(strings.Split(args["model_roots"], ":"), kserveModelDir) {
				errs = append(errs, where+": multi-model needs "+kserveModelDir+" in --model_roots")
			}
		} else if args["model_base_path"] != kserveModelDir {
			errs = append(errs, where+": --model_base_path must be "+kserveModelDir+" (where the storage initializer puts the model)")
		}
		runtimes[r.Metadata.Name] = info
	}
	isvcRuntime := map[string]runtimeInfo{}
	for _, s := range o.InferenceServices {
		where := "InferenceService " + s.Metadata.Name
		p := s.Spec.Predictor
		if p.AutoScaling != nil {
			for _, m := range p.AutoScaling.Metrics {
				if m.External != nil {
					errs = append(errs, unknownMetricErrs(where, m.External.Metric.Query, facts)...)
				}
			}
		}
		if p.Model == nil {
			errs = append(errs, where+": predictor.model is required (the runtime is chosen by model format)")
			continue
		}
		rt, ok := runtimes[p.Model.Runtime]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: runtime %q is not in this manifest set", where, p.Model.Runtime))
			continue
		}
		isvcRuntime[s.Metadata.Name] = rt
		if pv := p.Model.ProtocolVersion; pv != "" && !slices.Contains(rt.protocols, pv) {
			errs = append(errs, fmt.Sprintf("%s: protocolVersion %s is not declared by runtime %s", where, pv, p.Model.Runtime))
		}
		mms := p.Model.StorageURI == nil
		if mms != rt.multiModel {
			errs = append(errs, fmt.Sprintf("%s: storageUri set=%v, but runtime %s multiModel=%v (KServe treats a predictor without storageUri as multi-model)", where, !mms, p.Model.Runtime, rt.multiModel))
		}
		grpcPort, _ := rt.args.intFlag("port", defaultGRPCPort)
		for _, port := range p.Model.Ports {
			if port.Name == "h2c" && int(port.ContainerPort) != grpcPort {
				errs = append(errs, fmt.Sprintf("%s: h2c port %d is not the runtime's gRPC port %d", where, port.ContainerPort, grpcPort))
			}
		}
		term := int64(defaultTerminationSec)
		if p.TerminationGracePeriodSeconds != nil {
			term = *p.TerminationGracePeriodSeconds
		}
		if term*1000 < int64(rt.drainBudget)+1000 {
			errs = append(errs, fmt.Sprintf("%s: terminationGracePeriodSeconds %d does not cover runtime %s's drain (%d ms plus 1 s)", where, term, p.Model.Runtime, rt.drainBudget))
		}
	}
	for _, t := range o.TrainedModels {
		where := "TrainedModel " + t.Metadata.Name
		rt, ok := isvcRuntime[t.Spec.InferenceService]
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: InferenceService %q is not in this manifest set", where, t.Spec.InferenceService))
			continue
		}
		if !rt.multiModel {
			errs = append(errs, fmt.Sprintf("%s: InferenceService %s does not run a multi-model runtime", where, t.Spec.InferenceService))
		}
		if t.Spec.Model.Framework != "onnx" {
			errs = append(errs, fmt.Sprintf("%s: framework %q; the runtime serves onnx", where, t.Spec.Model.Framework))
		}
	}
	return errs
}
