package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The repository root, from deploy/validate.
const repoRoot = "../.."

var (
	sharedOnce      sync.Once
	sharedValidator *Validator
	sharedFacts     *ServerFacts
	sharedErr       error
)

// validator returns one Validator for the whole run, with KServe's and KEDA's CRDs loaded
// (their module zips are fetched once through the Go module proxy into the module cache).
func validator(t *testing.T) (*Validator, *ServerFacts) {
	t.Helper()
	sharedOnce.Do(func() {
		v, err := New()
		if err != nil {
			sharedErr = err
			return
		}
		v.Skip("kustomize.config.k8s.io/v1beta1", "Kustomization")
		if err := v.LoadOperatorCRDs(KServe, KEDA); err != nil {
			sharedErr = err
			return
		}
		sharedValidator = v
		sharedFacts, sharedErr = LoadServerFacts(repoRoot)
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedValidator, sharedFacts
}

func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no YAML files in %s", dir)
	}
	return out
}

func rel(p string) string { return strings.TrimPrefix(filepath.ToSlash(p), repoRoot+"/") }

// Every YAML file under deploy/ (kustomize patches included) decodes strictly.
func TestEveryManifestFileIsStrictlyValid(t *testing.T) {
	v, _ := validator(t)
	for _, dir := range []string{"kubernetes", "kserve", "autoscaling"} {
		for _, f := range yamlFiles(t, filepath.Join(repoRoot, "deploy", dir)) {
			t.Run(rel(f), func(t *testing.T) {
				errs, n := v.ValidateFile(f)
				for _, e := range errs {
					t.Error(e)
				}
				if n == 0 {
					t.Error("no documents")
				}
			})
		}
	}
}

// kustomizations lists deploy/kubernetes/base and every overlay, so a new overlay is checked
// without editing this test.
func kustomizations(t *testing.T) []string {
	t.Helper()
	dirs := []string{filepath.Join(repoRoot, "deploy/kubernetes/base")}
	overlays, err := filepath.Glob(filepath.Join(repoRoot, "deploy/kubernetes/overlays/*/kustomization.yaml"))
	if err != nil || len(overlays) == 0 {
		t.Fatalf("no overlays found: %v", err)
	}
	for _, o := range overlays {
		dirs = append(dirs, filepath.Dir(o))
	}
	return dirs
}

func kinds(o *Objects) []string {
	var out []string
	add := func(kind string, n int) {
		for range n {
			out = append(out, kind)
		}
	}
	add("Deployment", len(o.Deployments))
	add("Service", len(o.Services))
	add("ConfigMap", len(o.ConfigMaps))
	add("PodDisruptionBudget", len(o.PDBs))
	add("HorizontalPodAutoscaler", len(o.HPAs))
	add("ScaledObject", len(o.ScaledObjects))
	return out
}

// Each kustomization renders (kustomize's krusty, in process), every rendered object decodes
// strictly, and the set passes the project's rules.
func TestKustomizationsRenderValid(t *testing.T) {
	v, facts := validator(t)
	want := map[string][]string{
		"base":               {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "HorizontalPodAutoscaler"},
		"object-storage":     {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "HorizontalPodAutoscaler"},
		"keda":               {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "ScaledObject"},
		"prometheus-adapter": {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "HorizontalPodAutoscaler"},
	}
	for _, dir := range kustomizations(t) {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			out, err := RenderKustomization(dir)
			if err != nil {
				t.Fatal(err)
			}
			errs, n := v.ValidateStream("kustomize build "+rel(dir), bytes.NewReader(out))
			for _, e := range errs {
				t.Error(e)
			}
			var o Objects
			if err := o.Add(out); err != nil {
				t.Fatal(err)
			}
			for _, e := range CheckObjects(&o, facts) {
				t.Error(e)
			}
			exp, ok := want[name]
			if !ok {
				t.Fatalf("no expectation for kustomization %s: add it to this table", name)
			}
			if got := kinds(&o); !slices.Equal(got, exp) {
				t.Errorf("rendered kinds %v, want %v", got, exp)
			}
			t.Logf("%d objects", n)
		})
	}
}

func renderObjects(t *testing.T, name string) *Objects {
	t.Helper()
	dir := filepath.Join(repoRoot, "deploy/kubernetes", name)
	out, err := RenderKustomization(dir)
	if err != nil {
		t.Fatal(err)
	}
	var o Objects
	if err := o.Add(out); err != nil {
		t.Fatal(err)
	}
	return &o
}

// What the overlays are for, beyond rendering valid objects.
func TestOverlaysChangeWhatTheyClaim(t *testing.T) {
	base := renderObjects(t, "base")
	if len(base.Deployments[0].Spec.Template.Spec.Volumes) == 0 ||
		base.Deployments[0].Spec.Template.Spec.Volumes[0].PersistentVolumeClaim == nil {
		t.Error("base: the models volume is not the PVC")
	}
	obj := renderObjects(t, "overlays/object-storage")
	pod := obj.Deployments[0].Spec.Template.Spec
	if len(pod.InitContainers) != 1 || !strings.HasPrefix(pod.InitContainers[0].Image, "kserve/storage-initializer:") {
		t.Errorf("object-storage: want the storage initializer as init container, got %+v", pod.InitContainers)
	}
	if v := findVolume(pod.Volumes, "models"); v == nil || v.EmptyDir == nil || v.PersistentVolumeClaim != nil {
		t.Errorf("object-storage: models volume should be an emptyDir only, got %+v", v)
	}
	if len(pod.InitContainers) == 1 {
		// pairs of source URI and destination under the models mount
		a := pod.InitContainers[0].Args
		if len(a) == 0 || len(a)%2 != 0 {
			t.Errorf("storage initializer args must be URI/destination pairs: %v", a)
		}
		for i := 1; i < len(a); i += 2 {
			if !strings.HasPrefix(a[i], "/models/") {
				t.Errorf("destination %s is not under /models", a[i])
			}
		}
	}
	pa := renderObjects(t, "overlays/prometheus-adapter")
	if len(pa.HPAs) != 1 || len(pa.HPAs[0].Spec.Metrics) != 2 || pa.HPAs[0].Spec.Metrics[1].Pods == nil {
		t.Errorf("prometheus-adapter: want CPU + Pods metric, got %+v", pa.HPAs)
	}
}

// The KServe runtimes, InferenceServices and TrainedModels decode strictly against KServe's
// CRDs and agree with each other and with the server.
func TestKServeManifests(t *testing.T) {
	v, facts := validator(t)
	var o Objects
	for _, f := range yamlFiles(t, filepath.Join(repoRoot, "deploy/kserve")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		errs, _ := v.ValidateStream(rel(f), bytes.NewReader(b))
		for _, e := range errs {
			t.Error(e)
		}
		if err := o.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range CheckObjects(&o, facts) {
		t.Error(e)
	}
	if len(o.Runtimes) != 3 || len(o.InferenceServices) != 5 || len(o.TrainedModels) != 2 {
		t.Errorf("want 3 runtimes, 5 InferenceServices, 2 TrainedModels; got %d, %d, %d",
			len(o.Runtimes), len(o.InferenceServices), len(o.TrainedModels))
	}
}

// The prometheus-adapter rules decode strictly into the adapter's own config types, and name
// metrics the server exports.
func TestPrometheusAdapterRules(t *testing.T) {
	_, facts := validator(t)
	var o Objects
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy/autoscaling/prometheus-adapter-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Add(b); err != nil {
		t.Fatal(err)
	}
	if len(o.ConfigMaps) != 1 {
		t.Fatalf("want one ConfigMap, got %d", len(o.ConfigMaps))
	}
	for _, e := range adapterErrors(o.ConfigMaps[0].Data["config.yaml"], facts) {
		t.Error(e)
	}
	// The HPA of the prometheus-adapter overlay asks for a metric these rules serve.
	names, _ := ValidateAdapterRules([]byte(o.ConfigMaps[0].Data["config.yaml"]))
	pa := renderObjects(t, "overlays/prometheus-adapter")
	for _, m := range pa.HPAs[0].Spec.Metrics {
		if m.Pods != nil && !slices.Contains(names, m.Pods.Metric.Name) {
			t.Errorf("HPA asks for %s; the adapter rules serve %v", m.Pods.Metric.Name, names)
		}
	}
}

func adapterErrors(config string, facts *ServerFacts) []string {
	var errs []string
	if _, err := ValidateAdapterRules([]byte(config)); err != nil {
		errs = append(errs, "prometheus-adapter config.yaml: "+err.Error())
	}
	var q struct {
		Rules []struct {
			SeriesQuery string `json:"seriesQuery"`
		} `json:"rules"`
	}
	_ = yamlUnmarshal([]byte(config), &q)
	for _, r := range q.Rules {
		errs = append(errs, unknownMetricErrs("prometheus-adapter rule", r.SeriesQuery, facts)...)
	}
	return errs
}

// Every fixture in testdata/bad must fail, with the messages its "# want:" lines name: the
// strict decoding (unknown fields, duplicate keys, wrong types, enums, required fields,
// removed API versions, unknown kinds) and the project's rules both bite.
func TestWrongManifestsFail(t *testing.T) {
	v, facts := validator(t)
	for _, f := range yamlFiles(t, "testdata/bad") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, line := range strings.Split(string(b), "\n") {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					want = append(want, strings.TrimSpace(w))
				}
			}
			if len(want) == 0 {
				t.Fatal(`fixture has no "# want:" line`)
			}
			var msgs []string
			errs, _ := v.ValidateStream(f, bytes.NewReader(b))
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			var o Objects
			if err := o.Add(b); err == nil {
				msgs = append(msgs, CheckObjects(&o, facts)...)
				for _, cm := range o.ConfigMaps {
					if c, ok := cm.Data["config.yaml"]; ok {
						msgs = append(msgs, adapterErrors(c, facts)...)
					}
				}
			} else {
				msgs = append(msgs, err.Error())
			}
			joined := strings.Join(msgs, "\n")
			if len(msgs) == 0 {
				t.Fatal("accepted; it must fail")
			}
			for _, w := range want {
				if !strings.Contains(joined, w) {
					t.Errorf("missing %q in:\n%s", w, joined)
				}
			}
			t.Logf("fails as expected:\n%s", joined)
		})
	}
}

// The own-overlay example of docs/deployment.md (namespace, image, a variant) renders and
// validates, so the documented way to customise keeps working.
func TestReadmeOverlayExample(t *testing.T) {
	v, facts := validator(t)
	readme, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deployment.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "cat > my-visionserve/kustomization.yaml <<'YAML'\n")
	body, _, ok2 := strings.Cut(after, "\nYAML\n")
	if !ok || !ok2 {
		t.Fatal("docs/deployment.md: the my-visionserve/kustomization.yaml example is gone; update this test")
	}
	dir := t.TempDir()
	abs, _ := filepath.Abs(filepath.Join(repoRoot, "deploy"))
	if err := os.Symlink(abs, filepath.Join(dir, "deploy")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "my-visionserve/kustomization.yaml"), body+"\n")
	out, err := RenderKustomization(filepath.Join(dir, "my-visionserve"))
	if err != nil {
		t.Fatal(err)
	}
	errs, _ := v.ValidateStream("docs/deployment.md overlay", bytes.NewReader(out))
	for _, e := range errs {
		t.Error(e)
	}
	var o Objects
	if err := o.Add(out); err != nil {
		t.Fatal(err)
	}
	for _, e := range CheckObjects(&o, facts) {
		t.Error(e)
	}
	d := o.Deployments[0]
	if d.Namespace != "visionserve" || !strings.HasPrefix(d.Spec.Template.Spec.Containers[0].Image, "my-registry.example.com/visionserve:") {
		t.Errorf("namespace %q, image %q", d.Namespace, d.Spec.Template.Spec.Containers[0].Image)
	}
}
