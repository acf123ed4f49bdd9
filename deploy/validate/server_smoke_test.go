package validate

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// No cluster runs here (docs/kubernetes.md says why), so this is the closest to "deploy and
// call it": the real server (the built CLI) runs with exactly the args of the manifests'
// visionserve containers and the files their volumes would hold (ConfigMap data, downward API
// annotations), the paths re-rooted into a temporary directory, listeners on loopback port 0.
// Then it is probed the way the kubelet would (every probe of the container), scraped where
// the annotations say, called, and stopped with SIGTERM: /readyz must turn 503 at once while
// the listeners keep serving, and the process must exit 0 within the pod's grace period.

type smokeEnv struct {
	root   string // re-rooting prefix
	shared string // ../shared (models and photos)
	cli    string
}

func smokeSetup(t *testing.T) smokeEnv {
	t.Helper()
	skip := func(reason string) {
		if os.Getenv("VISIONSERVE_REQUIRE_SERVER_SMOKE") == "1" {
			t.Fatal(reason)
		}
		t.Skip(reason + " (VISIONSERVE_REQUIRE_SERVER_SMOKE=1 turns this skip into a failure)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		skip("node is not on PATH")
	}
	root, _ := filepath.Abs(repoRoot)
	cli := filepath.Join(root, "packages/cli/bin/visionserve.js")
	if _, err := os.Stat(filepath.Join(root, "packages/cli/dist/src/main.js")); err != nil {
		skip("the CLI is not built (npm run build)")
	}
	shared := filepath.Join(root, "..", "shared")
	for _, f := range []string{"models/mobilenetv2-12-int8.onnx", "models/yolox_nano_tfod.onnx", "images/cat_tabby.jpg"} {
		if _, err := os.Stat(filepath.Join(shared, f)); err != nil {
			skip("../shared is missing " + f)
		}
	}
	return smokeEnv{root: t.TempDir(), shared: shared, cli: cli}
}

func (e smokeEnv) path(p string) string { return filepath.Join(e.root, p) }

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// placeModel lays out one model as the volume (or storage URI) holds it.
func (e smokeEnv) placeModel(t *testing.T, dir, model string) {
	t.Helper()
	// Copies, as a volume or a storage URI holds them (the server refuses label files that
	// are symlinks out of the model directory).
	copyShared := func(src, dst string) {
		b, err := os.ReadFile(filepath.Join(e.shared, "models", src))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dst, string(b))
	}
	switch model {
	case "mobilenet":
		copyShared("mobilenetv2-12-int8.onnx", filepath.Join(dir, "1/model.onnx"))
		copyShared("imagenet_synset.txt", filepath.Join(dir, "imagenet_synset.txt"))
		writeFile(t, filepath.Join(dir, "visionserve.json"), `{
  "image": { "width": 224, "height": 224, "resize": "crop", "layout": "NCHW",
             "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225] },
  "postprocess": { "kind": "classification", "softmax": true, "topK": 5,
                   "labels": "imagenet_synset.txt", "labelsFormat": "synset" } }`)
	case "detector":
		copyShared("yolox_nano_tfod.onnx", filepath.Join(dir, "1/model.onnx"))
		copyShared("mscoco_label_map.pbtxt", filepath.Join(dir, "mscoco_label_map.pbtxt"))
		writeFile(t, filepath.Join(dir, "visionserve.json"), `{
  "image": { "input": "input_tensor", "layout": "NHWC", "dtype": "uint8", "channelOrder": "RGB" },
  "postprocess": { "kind": "detection", "labels": "mscoco_label_map.pbtxt", "scoreThreshold": 0.5 } }`)
	default:
		t.Fatalf("unknown model %s", model)
	}
}

// volumeFiles writes what the container's ConfigMap and downward API volumes would hold.
func (e smokeEnv) volumeFiles(t *testing.T, c corev1.Container, vols []corev1.Volume, configMaps []corev1.ConfigMap, annotations map[string]string) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		v := findVolume(vols, m.Name)
		if v == nil {
			t.Fatalf("volume %s missing", m.Name)
		}
		switch {
		case v.ConfigMap != nil:
			for _, cm := range configMaps {
				if cm.Name != v.ConfigMap.Name {
					continue
				}
				for k, content := range cm.Data {
					writeFile(t, e.path(filepath.Join(m.MountPath, k)), e.reroot(content))
				}
			}
		case v.DownwardAPI != nil:
			for _, it := range v.DownwardAPI.Items {
				ref := annotationRef.FindStringSubmatch(it.FieldRef.FieldPath)
				if ref == nil {
					t.Fatalf("downward API item %s: only annotations are emulated", it.Path)
				}
				writeFile(t, e.path(filepath.Join(m.MountPath, it.Path)), e.reroot(annotations[ref[1]]))
			}
		default:
			if err := os.MkdirAll(e.path(m.MountPath), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// reroot moves absolute base paths of a model config file into the temporary root.
func (e smokeEnv) reroot(content string) string {
	return basePathEntry.ReplaceAllStringFunc(content, func(m string) string {
		return strings.Replace(m, "'/", "'"+e.root+"/", 1)
	})
}

type server struct {
	cmd   *exec.Cmd
	ports map[string]int // grpc, rest, sagemaker
	exit  chan error
	log   *bytes.Buffer
}

// start runs the container's args with paths re-rooted and listeners on loopback port 0.
func (e smokeEnv) start(t *testing.T, c corev1.Container, modelName string) *server {
	t.Helper()
	args := []string{e.cli}
	for _, a := range c.Args {
		name, value, ok := strings.Cut(a, "=")
		if !ok {
			args = append(args, a)
			continue
		}
		value = strings.ReplaceAll(value, "{{.Name}}", modelName)
		switch name {
		case "--port", "--rest_api_port", "--sagemaker_port":
			if n, _ := strconv.Atoi(value); n > 0 {
				value = "0"
			}
		default:
			parts := strings.Split(value, ":")
			for i, p := range parts {
				if strings.HasPrefix(p, "/") {
					parts[i] = e.path(p)
				}
			}
			value = strings.Join(parts, ":")
		}
		args = append(args, name+"="+value)
	}
	args = append(args, "--host=127.0.0.1")
	cmd := exec.Command("node", args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+e.path("/tmp"))
	_ = os.MkdirAll(e.path("/tmp"), 0o755)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, exit: make(chan error, 1), log: &bytes.Buffer{}}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	ready := make(chan map[string]int, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			s.log.Write(line)
			s.log.WriteByte('\n')
			var rec struct {
				Msg       string `json:"msg"`
				GRPC      int    `json:"grpc"`
				REST      int    `json:"rest"`
				SageMaker int    `json:"sagemaker"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "visionserve ready" {
				ready <- map[string]int{"grpc": rec.GRPC, "rest": rec.REST, "sagemaker": rec.SageMaker}
			}
		}
		s.exit <- cmd.Wait()
	}()
	select {
	case s.ports = <-ready:
	case err := <-s.exit:
		t.Fatalf("server exited before ready: %v\n%s", err, s.log.String())
	case <-time.After(120 * time.Second):
		t.Fatalf("server not ready after 120 s\n%s", s.log.String())
	}
	return s
}

// url maps a container port of the manifest (name or number) to the server's bound port.
func (s *server) url(t *testing.T, c corev1.Container, port intstr.IntOrString, path string) string {
	t.Helper()
	args, _ := ParseServerArgs(c, &ServerFacts{Flags: map[string]bool{}})
	listeners, err := args.Listeners()
	if err != nil {
		t.Fatal(err)
	}
	n := int(port.IntVal)
	if port.Type == intstr.String {
		for _, p := range c.Ports {
			if p.Name == port.StrVal {
				n = int(p.ContainerPort)
			}
		}
	}
	kind, ok := listeners[n]
	if !ok {
		t.Fatalf("port %s is no listener of the server", port.String())
	}
	return fmt.Sprintf("http://127.0.0.1:%d%s", s.ports[kind], path)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func post(t *testing.T, url, contentType string, body []byte, header map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// probeAndScrape does what the kubelet and Prometheus would: every probe of the container,
// then the metrics page where the annotations point.
func (s *server) probeAndScrape(t *testing.T, c corev1.Container, annotations map[string]string) {
	t.Helper()
	for kind, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		if p == nil {
			continue
		}
		if code, body := get(t, s.url(t, c, p.HTTPGet.Port, p.HTTPGet.Path)); code != 200 {
			t.Errorf("%s probe %s: %d %s", kind, p.HTTPGet.Path, code, body)
		}
	}
	port, path := annotations["prometheus.io/port"], annotations["prometheus.io/path"]
	if port == "" {
		port, path = annotations["prometheus.kserve.io/port"], annotations["prometheus.kserve.io/path"]
	}
	n, _ := strconv.Atoi(port)
	code, body := get(t, s.url(t, c, intstr.FromInt32(int32(n)), path))
	if code != 200 || !strings.Contains(body, "visionserve_requests_in_flight") {
		t.Errorf("metrics at :%s%s: %d, %.200s", port, path, code, body)
	}
}

// terminate sends SIGTERM as the kubelet does and checks the drain contract.
func (s *server) terminate(t *testing.T, c corev1.Container, graceSec int64) {
	t.Helper()
	ready := s.url(t, c, c.ReadinessProbe.HTTPGet.Port, c.ReadinessProbe.HTTPGet.Path)
	live := s.url(t, c, c.LivenessProbe.HTTPGet.Port, c.LivenessProbe.HTTPGet.Path)
	sent := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		code, _ := get(t, ready)
		if code == 503 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readiness still %d 2 s after SIGTERM", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Still serving during the readiness delay: endpoints and load balancers catch up.
	if code, _ := get(t, live); code != 200 {
		t.Errorf("liveness %d during the readiness delay", code)
	}
	select {
	case err := <-s.exit:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, s.log.String())
		}
		t.Logf("exited %.1f s after SIGTERM (grace period %d s)", time.Since(sent).Seconds(), graceSec)
	case <-time.After(time.Duration(graceSec) * time.Second):
		t.Errorf("still running %d s after SIGTERM: the kubelet would SIGKILL it", graceSec)
	}
}

// v2Infer sends a 1x3x224x224 FP32 tensor as binary tensor data and returns the response.
func v2Infer(t *testing.T, base, model string) (int, string) {
	t.Helper()
	const n = 3 * 224 * 224
	header := fmt.Sprintf(`{"inputs":[{"name":"input","shape":[1,3,224,224],"datatype":"FP32","parameters":{"binary_data_size":%d}}],"outputs":[{"name":"output","parameters":{"binary_data":false}}]}`, n*4)
	body := bytes.NewBufferString(header)
	raw := make([]byte, n*4)
	for i := range n {
		binary.LittleEndian.PutUint32(raw[i*4:], math.Float32bits(float32(i%255)/255))
	}
	body.Write(raw)
	return post(t, base+"/v2/models/"+model+"/infer", "application/octet-stream", body.Bytes(),
		map[string]string{"Inference-Header-Content-Length": strconv.Itoa(len(header))})
}

func TestServerRunsTheManifests(t *testing.T) {
	t.Run("Deployment", func(t *testing.T) {
		t.Parallel()
		e := smokeSetup(t)
		o := renderObjects(t, "base")
		d := o.Deployments[0]
		pod := d.Spec.Template
		c := pod.Spec.Containers[0]
		e.placeModel(t, e.path("/models/mobilenet"), "mobilenet")
		e.placeModel(t, e.path("/models/detector"), "detector")
		e.volumeFiles(t, c, pod.Spec.Volumes, o.ConfigMaps, pod.Annotations)
		s := e.start(t, c, "")
		s.probeAndScrape(t, c, pod.Annotations)
		photo, err := os.ReadFile(filepath.Join(e.shared, "images/cat_tabby.jpg"))
		if err != nil {
			t.Fatal(err)
		}
		sm := fmt.Sprintf("http://127.0.0.1:%d", s.ports["sagemaker"])
		code, body := post(t, sm+"/invocations", "image/jpeg", photo,
			map[string]string{"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-name=mobilenet"})
		if code != 200 || !strings.Contains(body, "tabby") {
			t.Errorf("/invocations mobilenet: %d %.300s", code, body)
		}
		code, body = post(t, sm+"/invocations", "image/jpeg", photo,
			map[string]string{"X-Amzn-SageMaker-Custom-Attributes": "tfs-model-name=detector"})
		if code != 200 || !strings.Contains(body, "num_detections") {
			t.Errorf("/invocations detector: %d %.300s", code, body)
		}
		s.terminate(t, c, *pod.Spec.TerminationGracePeriodSeconds)
	})
	t.Run("ClusterServingRuntime", func(t *testing.T) {
		t.Parallel()
		e := smokeSetup(t)
		var o Objects
		b, err := os.ReadFile(filepath.Join(repoRoot, "deploy/kserve/clusterservingruntime.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Add(b); err != nil {
			t.Fatal(err)
		}
		r := o.Runtimes[0]
		c := r.Spec.Containers[0]
		// What KServe's storage initializer leaves for an InferenceService named mobilenet.
		e.placeModel(t, e.path("/mnt/models"), "mobilenet")
		e.volumeFiles(t, c, r.Spec.Volumes, nil, r.Spec.Annotations)
		s := e.start(t, c, "mobilenet")
		s.probeAndScrape(t, c, r.Spec.Annotations)
		base := s.url(t, c, intstr.FromInt32(kserveHTTPPort), "")
		if code, body := v2Infer(t, base, "mobilenet"); code != 200 || !strings.Contains(body, `"shape":[1,1000]`) {
			t.Errorf("v2 infer: %d %.300s", code, body)
		}
		if code, body := get(t, base+"/v1/models/mobilenet"); code != 200 || !strings.Contains(body, "AVAILABLE") {
			t.Errorf("v1 model status: %d %s", code, body)
		}
		s.terminate(t, c, defaultTerminationSec)
	})
	t.Run("ServingRuntime multi-model", func(t *testing.T) {
		t.Parallel()
		e := smokeSetup(t)
		var o Objects
		b, err := os.ReadFile(filepath.Join(repoRoot, "deploy/kserve/servingruntime-multimodel.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Add(b); err != nil {
			t.Fatal(err)
		}
		r := o.Runtimes[0]
		c := r.Spec.Containers[0]
		if err := os.MkdirAll(e.path("/mnt/models"), 0o755); err != nil {
			t.Fatal(err)
		}
		e.volumeFiles(t, c, r.Spec.Volumes, nil, r.Spec.Annotations)
		s := e.start(t, c, "")
		s.probeAndScrape(t, c, r.Spec.Annotations)
		base := s.url(t, c, intstr.FromInt32(kserveHTTPPort), "")
		// What KServe's model agent does for a TrainedModel: download, then load by name.
		e.placeModel(t, e.path("/mnt/models/mobilenet"), "mobilenet")
		if code, body := post(t, base+"/v2/repository/models/mobilenet/load", "application/json", []byte("{}"), nil); code != 200 {
			t.Fatalf("agent load: %d %s", code, body)
		}
		if code, body := v2Infer(t, base, "mobilenet"); code != 200 || !strings.Contains(body, `"shape":[1,1000]`) {
			t.Errorf("v2 infer: %d %.300s", code, body)
		}
		if code, body := post(t, base+"/v2/repository/models/mobilenet/unload", "application/json", []byte("{}"), nil); code != 200 {
			t.Errorf("agent unload: %d %s", code, body)
		}
		if code, _ := get(t, base+"/v2/models/mobilenet/ready"); code == 200 {
			t.Error("still ready after unload")
		}
		s.terminate(t, c, defaultTerminationSec)
	})
}
