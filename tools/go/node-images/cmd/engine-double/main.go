// Command engine-double is a TEST DOUBLE of the inference engines' interfaces, never an engine:
// it loads no model and generates nothing. Installed as `python3` in the local plane's
// engine-double image, it is started by the very command lines InferCrane renders --
//
//	python3 -m vllm.entrypoints.openai.api_server --model M --served-model-name N ... (vLLM)
//	python3 -m sglang.launch_server --model-path M --api-key K ...                  (SGLang)
//
// -- and behaves as those servers do at their edges: it parses the arguments the engine takes and
// refuses unknown ones (argparse's words, exit 2), reads the key the way the engine does
// (VLLM_API_KEY or --api-key; SGLang's --api-key), reads the weights' snapshot from HF_HUB_CACHE
// when HF_HUB_OFFLINE=1 and fails as the engine does when it is missing, "loads" for
// INFERCRANE_DOUBLE_LOAD_SECONDS (default 3) -- as vLLM, listening only then; as SGLang, listening at
// once, /v1/models answering while /health answers 503 until then --, serves /health, /v1/models (401 without
// the key) and deterministic /v1/completions and /v1/chat/completions, and on SIGTERM stops
// accepting, finishes what is in flight (vLLM: for up to --shutdown-timeout seconds, aborting it at
// once with 0, its default; SGLang: all of it), then exits 0.
//
// Test settings (pod environment): INFERCRANE_DOUBLE_LOAD_SECONDS, INFERCRANE_DOUBLE_SERVES (a
// comma-separated list served instead of the --served-model-name values: a replica serving the
// wrong model), INFERCRANE_DOUBLE_RESPONSE_SECONDS (each completion takes this long),
// INFERCRANE_DOUBLE_VLLM_VERSION (the vLLM release it stands in for: before 0.18.0, which added
// --shutdown-timeout, that flag is an unrecognized argument, as it is to those releases),
// INFERCRANE_DOUBLE_FAIL_EVERY (every Nth completion answers 500: 20 fails 5 %),
// INFERCRANE_DOUBLE_ANSWER (the completions' text instead of "double:<model>": a release whose
// answers changed, as a broken chat template changes them).
//
// Its start, in the stages an engine's takes (each logged as "stage <name>: ..." with its time;
// /health answers 503 throughout, /v1/models as the engine it stands for does): **weights** --
// with a local directory as its model (a mounted model image), or HF_HUB_OFFLINE=1 and the
// snapshot in the Hugging Face cache, it reads every file and hashes it (SHA-256), so the time is
// the volume's own; **compile** -- INFERCRANE_DOUBLE_COMPILE_SECONDS (default 0), skipped when its
// cache directory (INFERCRANE_DOUBLE_COMPILE_CACHE, else VLLM_CACHE_ROOT, else
// TORCHINDUCTOR_CACHE_DIR) holds the mark of an earlier compile of the same weights (their hash;
// without weights read, the model and revision), written after each compile; **warm-up** --
// INFERCRANE_DOUBLE_LOAD_SECONDS (default 3). The defaults keep the test tier fast; a bench sets
// the compile and load seconds for a start of tens of seconds.
//
// GET /metrics (no key, as the engines') serves the engine's Prometheus names with honest counts of
// what this process answered. vLLM: vllm:time_to_first_token_seconds and
// vllm:e2e_request_latency_seconds (histograms with vLLM's bounds; the double answers in one piece,
// so its first token is its answer), vllm:request_success_total, and http_requests_total by handler
// and status class (the instrumentator vLLM mounts). SGLang (only with --enable-metrics, as SGLang
// mounts it): the same histograms under sglang: with SGLang's bounds, sglang:num_requests_total and
// sglang:num_aborted_requests_total, where the double counts its failed requests.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// engine is what differs between the two servers the double stands in for.
type engine struct {
	module, prog, modelFlag string
	values                  map[string]bool // flags that take one value
	switches                map[string]bool // flags that take none
	severalNames            bool            // --served-model-name takes one or more values
	keyFromEnv              string          // the variable the engine reads its key from ("" none)
	shutdownFlag            string          // how long it finishes in-flight requests on SIGTERM ("" none: it drains)
	owner                   string          // owned_by in /v1/models
	metrics                 string          // the prefix of its own metric names
}

func set(words ...string) map[string]bool {
	m := map[string]bool{}
	for _, w := range words {
		m[w] = true
	}
	return m
}

var engines = map[string]engine{
	"vllm.entrypoints.openai.api_server": {
		module: "vllm.entrypoints.openai.api_server", prog: "api_server.py", modelFlag: "--model",
		values: set("--model", "--host", "--port", "--revision", "--tensor-parallel-size", "--api-key",
			"--max-model-len", "--gpu-memory-utilization", "--dtype", "--download-dir", "--max-num-seqs",
			"--quantization", "--seed", "--tokenizer", "--chat-template", "--uvicorn-log-level",
			"--pipeline-parallel-size", "--kv-cache-dtype", "--max-num-batched-tokens", "--swap-space",
			"--generation-config", "--tool-call-parser", "--served-model-name", "--shutdown-timeout"),
		switches: set("--trust-remote-code", "--enforce-eager", "--enable-prefix-caching",
			"--disable-log-requests", "--enable-auto-tool-choice", "--disable-log-stats"),
		severalNames: true, keyFromEnv: "VLLM_API_KEY", shutdownFlag: "--shutdown-timeout", owner: "vllm",
		metrics: "vllm:",
	},
	"sglang.launch_server": {
		module: "sglang.launch_server", prog: "launch_server.py", modelFlag: "--model-path",
		values: set("--model-path", "--host", "--port", "--revision", "--tp-size", "--api-key",
			"--mem-fraction-static", "--context-length", "--dtype", "--quantization", "--chunked-prefill-size",
			"--max-running-requests", "--random-seed", "--tokenizer-path", "--log-level", "--served-model-name"),
		switches: set("--trust-remote-code", "--enable-metrics", "--disable-radix-cache"),
		owner:    "sglang", metrics: "sglang:",
	},
}

// usage exits as argparse does: the message on stderr, exit status 2.
func usage(e engine, format string, a ...any) {
	fmt.Fprintf(os.Stderr, "usage: %s [-h] [options]\n%s: error: %s\n", e.prog, e.prog, fmt.Sprintf(format, a...))
	os.Exit(2)
}

// parse reads the engine's arguments: flag -> values (the last occurrence wins, as argparse).
func parse(e engine, args []string) map[string][]string {
	got := map[string][]string{}
	var unknown []string
	for i := 0; i < len(args); i++ {
		flag, value, inline := strings.Cut(args[i], "=")
		switch {
		case e.switches[flag] && !inline:
			got[flag] = nil
		case flag == "--served-model-name" && e.severalNames && !inline:
			var names []string
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
				i++
				names = append(names, args[i])
			}
			if len(names) == 0 {
				usage(e, "argument --served-model-name: expected at least one argument")
			}
			got[flag] = names
		case e.values[flag]:
			if !inline {
				if i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
					usage(e, "argument %s: expected one argument", flag)
				}
				i++
				value = args[i]
			}
			got[flag] = []string{value}
		default:
			unknown = append(unknown, args[i])
		}
	}
	if len(unknown) > 0 {
		usage(e, "unrecognized arguments: %s", strings.Join(unknown, " "))
	}
	return got
}

// before: is version ("0.17.1"; "" none: the newest) a release before major.minor?
func before(version string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if version == "" || len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (ma < major || (ma == major && mi < minor))
}

func first(got map[string][]string, flag, fallback string) string {
	if v := got[flag]; len(v) > 0 {
		return v[0]
	}
	return fallback
}

// snapshot finds the model's weights in the Hugging Face cache layout, or says why not.
func snapshot(model, revision string) (string, error) {
	cache := os.Getenv("HF_HUB_CACHE")
	if cache == "" {
		home := os.Getenv("HF_HOME")
		if home == "" {
			home = filepath.Join(os.Getenv("HOME"), ".cache", "huggingface")
		}
		cache = filepath.Join(home, "hub")
	}
	repo := filepath.Join(cache, "models--"+strings.ReplaceAll(model, "/", "--"))
	ref := revision
	if ref == "" {
		ref = "main"
	}
	commit := ref
	if b, err := os.ReadFile(filepath.Join(repo, "refs", ref)); err == nil {
		commit = strings.TrimSpace(string(b))
	}
	dir := filepath.Join(repo, "snapshots", commit)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		return "", fmt.Errorf("OSError: We couldn't connect to 'https://huggingface.co' to load the files, and "+
			"couldn't find them in the cached files (%s has no snapshot %s with config.json). "+
			"HF_HUB_OFFLINE=1 is set, so nothing is downloaded.", repo, ref)
	}
	return dir, nil
}

// load runs the start's stages (see the package comment), each logged with its time.
func load(weights, model, revision string) {
	identity := model + "@" + revision // what the compile cache is keyed by: the weights' hash once read
	if weights != "" {
		began := time.Now()
		read, sum, err := hashTree(weights)
		if err != nil {
			fmt.Fprintf(os.Stderr, "stage weights: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("stage weights: read %d bytes in %.1f s (sha256 %x)\n", read, time.Since(began).Seconds(), sum[:8])
		identity = fmt.Sprintf("%x", sum)
	}
	compileFor := seconds("INFERCRANE_DOUBLE_COMPILE_SECONDS", 0)
	if compileFor > 0 {
		cache := os.Getenv("INFERCRANE_DOUBLE_COMPILE_CACHE")
		for _, name := range []string{"VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR"} {
			if cache == "" {
				cache = os.Getenv(name)
			}
		}
		key := sha256.Sum256([]byte(identity))
		mark := ""
		if cache != "" {
			mark = filepath.Join(cache, fmt.Sprintf("infercrane-double-compiled-%x", key[:8]))
		}
		if _, err := os.Stat(mark); mark != "" && err == nil {
			fmt.Printf("stage compile: cache hit in %s (0.0 s)\n", cache)
		} else {
			time.Sleep(compileFor)
			if mark != "" {
				if err := os.WriteFile(mark, []byte(identity+"\n"), 0o644); err != nil {
					fmt.Printf("stage compile: its cache %s is not writable: %v\n", cache, err)
				}
			}
			fmt.Printf("stage compile: %.1f s (no cache entry)\n", compileFor.Seconds())
		}
	}
	warmFor := seconds("INFERCRANE_DOUBLE_LOAD_SECONDS", 3)
	time.Sleep(warmFor)
	fmt.Printf("stage warm-up: %.1f s\n", warmFor.Seconds())
}

// hashTree reads every regular file under dir (symlinks followed, as the Hugging Face cache's
// snapshot links its blobs) and returns how many bytes it read and their SHA-256, in path order.
func hashTree(dir string) (int64, [32]byte, error) {
	h := sha256.New()
	var read int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.Copy(h, f)
		read += n
		return err
	})
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return read, sum, err
}

func seconds(name string, fallback float64) time.Duration {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && v >= 0 {
		return time.Duration(v * float64(time.Second))
	}
	return time.Duration(fallback * float64(time.Second))
}

// The engines' own histogram bounds (seconds): each engine's page counts into its own buckets, so
// a verdict reads the resolution it would read from the engine.
var (
	vllmTTFT = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
		7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	vllmE2E = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
		120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	sglangTTFT = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	sglangE2E  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600,
		1200, 1800, 2400}
)

type histogram struct {
	bounds []float64
	counts []uint64 // per bound, not cumulative; the last is +Inf
	sum    float64
	n      uint64
}

func (h *histogram) observe(v float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(h.bounds)+1)
	}
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i]++
	h.sum += v
	h.n++
}

func (h *histogram) write(w *strings.Builder, name, labels string) {
	fmt.Fprintf(w, "# TYPE %s histogram\n", name)
	var cumulative uint64
	for i, bound := range h.bounds {
		if h.counts != nil {
			cumulative += h.counts[i]
		}
		fmt.Fprintf(w, "%s_bucket{%s,le=\"%s\"} %d\n", name, labels, strconv.FormatFloat(bound, 'f', -1, 64), cumulative)
	}
	fmt.Fprintf(w, "%s_bucket{%s,le=\"+Inf\"} %d\n%s_sum{%s} %g\n%s_count{%s} %d\n", name, labels, h.n, name, labels, h.sum, name, labels, h.n)
}

// processStart is this process's start (seconds since the epoch), as prometheus_client reports it.
var processStart = float64(time.Now().UnixNano()) / 1e9

// stats are the engine's counts of what this process answered, served at /metrics.
type stats struct {
	mu        sync.Mutex
	ttft, e2e histogram
	success   uint64
	http      map[[2]string]uint64 // (handler, status class) -> requests
}

func newStats(e engine) *stats {
	if e.metrics == "sglang:" {
		return &stats{ttft: histogram{bounds: sglangTTFT}, e2e: histogram{bounds: sglangE2E}}
	}
	return &stats{ttft: histogram{bounds: vllmTTFT}, e2e: histogram{bounds: vllmE2E}}
}

func (s *stats) answered(handler string, code int, took float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http == nil {
		s.http = map[[2]string]uint64{}
	}
	s.http[[2]string{handler, fmt.Sprintf("%dxx", code/100)}]++
	if code == http.StatusOK {
		s.ttft.observe(took)
		s.e2e.observe(took)
		s.success++
	}
}

// text is the page: vLLM's names, with http_requests_total from the instrumentator vLLM mounts; or
// SGLang's, which counts requests by no HTTP status -- sglang:num_requests_total (each request it
// finished, failed or not) and sglang:num_aborted_requests_total (the double counts its failed
// requests there, as SGLang's tokenizer counts the requests it aborts), each labelled counter
// shown only once it counted one, as prometheus_client shows them.
func (s *stats) text(prefix, model string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var w strings.Builder
	labels := fmt.Sprintf("model_name=%q", model)
	s.ttft.write(&w, prefix+"time_to_first_token_seconds", labels)
	s.e2e.write(&w, prefix+"e2e_request_latency_seconds", labels)
	keys := make([][2]string, 0, len(s.http))
	for k := range s.http {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	if prefix == "sglang:" {
		var finished, aborted uint64
		for _, k := range keys {
			finished += s.http[k]
			if k[1] == "5xx" {
				aborted += s.http[k]
			}
		}
		w.WriteString("# TYPE sglang:num_requests_total counter\n")
		if finished > 0 {
			fmt.Fprintf(&w, "sglang:num_requests_total{%s} %d\n", labels, finished)
		}
		w.WriteString("# TYPE sglang:num_aborted_requests_total counter\n")
		if aborted > 0 {
			fmt.Fprintf(&w, "sglang:num_aborted_requests_total{%s} %d\n", labels, aborted)
		}
		return w.String()
	}
	// vLLM's API server serves prometheus_client's process collector: its process's start time.
	fmt.Fprintf(&w, "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.2f\n", processStart)
	fmt.Fprintf(&w, "# TYPE %srequest_success_total counter\n%srequest_success_total{finished_reason=\"stop\",%s} %d\n",
		prefix, prefix, labels, s.success)
	w.WriteString("# TYPE http_requests_total counter\n")
	for _, k := range keys {
		fmt.Fprintf(&w, "http_requests_total{handler=%q,method=\"POST\",status=%q} %d\n", k[0], k[1], s.http[k])
	}
	return w.String()
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

func main() {
	if len(os.Args) < 3 || os.Args[1] != "-m" {
		fmt.Fprintln(os.Stderr, "engine double (a test double of vLLM and SGLang, not Python): expected `python3 -m MODULE ...`")
		os.Exit(2)
	}
	e, ok := engines[os.Args[2]]
	if !ok {
		fmt.Fprintf(os.Stderr, "/usr/local/bin/python3: No module named %s\n", os.Args[2])
		os.Exit(1)
	}
	if e.shutdownFlag != "" && before(os.Getenv("INFERCRANE_DOUBLE_VLLM_VERSION"), 0, 18) {
		values := map[string]bool{}
		for flag := range e.values {
			values[flag] = flag != e.shutdownFlag
		}
		e.values, e.shutdownFlag = values, ""
	}
	got := parse(e, os.Args[3:])
	model := first(got, e.modelFlag, "")
	if model == "" {
		usage(e, "the following arguments are required: %s", e.modelFlag)
	}
	served := got["--served-model-name"]
	if len(served) == 0 {
		served = []string{model}
	}
	if s := os.Getenv("INFERCRANE_DOUBLE_SERVES"); s != "" {
		served = strings.Split(s, ",")
	}
	key := first(got, "--api-key", "")
	if key == "" && e.keyFromEnv != "" {
		key = os.Getenv(e.keyFromEnv)
	}
	var shm syscall.Statfs_t
	shmBytes := int64(-1)
	if syscall.Statfs("/dev/shm", &shm) == nil {
		shmBytes = int64(shm.Blocks) * shm.Bsize
	}
	keyState := "none"
	if key != "" {
		keyState = "set"
	}
	fmt.Printf("engine double (%s interface; a test double, not an engine): uid=%d gid=%d model=%s served=%s key=%s shm_bytes=%d\n",
		e.module, os.Getuid(), os.Getgid(), model, strings.Join(served, ","), keyState, shmBytes)
	weights := ""
	if info, err := os.Stat(model); err == nil && info.IsDir() && filepath.IsAbs(model) {
		// A local directory, as the engines take one (a mounted model image): its files are the weights.
		fmt.Printf("weights: %s\n", model)
		weights = model
	} else if os.Getenv("HF_HUB_OFFLINE") == "1" {
		dir, err := snapshot(model, first(got, "--revision", ""))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("weights: %s\n", dir)
		weights = dir
	}
	// vLLM's API server listens once its engine is loaded; SGLang's listens first and lists its
	// models (/v1/models 200) while /health answers 503 until its warm-up ends.
	listensWarmingUp := e.metrics == "sglang:"
	var loaded atomic.Bool
	start := func() {
		load(weights, model, first(got, "--revision", ""))
		loaded.Store(true)
	}
	if !listensWarmingUp {
		start()
	}

	var inFlight, completions atomic.Int64
	counts := newStats(e)
	failEvery, _ := strconv.Atoi(os.Getenv("INFERCRANE_DOUBLE_FAIL_EVERY"))
	answer := os.Getenv("INFERCRANE_DOUBLE_ANSWER")
	authorized := func(r *http.Request) bool {
		return key == "" || r.Header.Get("Authorization") == "Bearer "+key
	}
	isServed := func(name string) bool {
		for _, s := range served {
			if s == name {
				return true
			}
		}
		return false
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if !loaded.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	_, sglangMetrics := got["--enable-metrics"]
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if e.metrics == "sglang:" && !sglangMetrics { // SGLang mounts /metrics only with --enable-metrics
			writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(counts.text(e.metrics, model)))
	})
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		if !authorized(r) {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
			return
		}
		switch r.URL.Path {
		case "/v1/models":
			data := []map[string]any{}
			for _, s := range served {
				data = append(data, map[string]any{"id": s, "object": "model", "owned_by": e.owner, "root": model})
			}
			writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
		case "/v1/completions", "/v1/chat/completions":
			if !loaded.Load() {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": "the engine is warming up"})
				return
			}
			var req struct {
				Model string `json:"model"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			if !isServed(req.Model) {
				writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
					"message": fmt.Sprintf("The model `%s` does not exist.", req.Model), "type": "NotFoundError", "code": 404}})
				return
			}
			started := time.Now()
			time.Sleep(seconds("INFERCRANE_DOUBLE_RESPONSE_SECONDS", 0))
			if n := completions.Add(1); failEvery > 0 && n%int64(failEvery) == 0 {
				writeJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{
					"message": "engine double: a failed request (INFERCRANE_DOUBLE_FAIL_EVERY)", "type": "InternalServerError", "code": 500}})
				counts.answered(r.URL.Path, http.StatusInternalServerError, time.Since(started).Seconds())
				return
			}
			defer func() { counts.answered(r.URL.Path, http.StatusOK, time.Since(started).Seconds()) }()
			text := "double:" + req.Model
			if answer != "" {
				text = answer
			}
			if r.URL.Path == "/v1/completions" {
				writeJSON(w, http.StatusOK, map[string]any{"id": "cmpl-double", "object": "text_completion", "model": req.Model,
					"choices": []map[string]any{{"index": 0, "text": text, "finish_reason": "stop"}}})
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"id": "chatcmpl-double", "object": "chat.completion", "model": req.Model,
				"choices": []map[string]any{{"index": 0, "message": map[string]string{"role": "assistant", "content": text},
					"finish_reason": "stop"}}})
		default:
			writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
		}
	})
	addr := net.JoinHostPort(first(got, "--host", "0.0.0.0"), first(got, "--port", "8000"))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe() }()
	fmt.Printf("serving on %s\n", addr)
	if listensWarmingUp {
		go func() {
			start()
			fmt.Println("warm-up done: /health answers 200")
		}()
	}
	select {
	case err := <-done:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	case sig := <-stop:
		// vLLM: --shutdown-timeout (default 0) bounds the drain, and 0 aborts what is in flight;
		// SGLang drains on SIGTERM by itself (the kubelet's grace period bounds it).
		drain := 10 * time.Minute
		if e.shutdownFlag != "" {
			n, err := strconv.ParseFloat(first(got, e.shutdownFlag, "0"), 64)
			if err != nil {
				n = 0
			}
			drain = time.Duration(n * float64(time.Second))
		}
		if drain <= 0 {
			fmt.Printf("%s: shutting down at once; aborting %d request(s) in flight\n", sig, inFlight.Load())
			_ = srv.Close()
			fmt.Println("stopped")
			return
		}
		fmt.Printf("%s: no new connections; finishing %d request(s) in flight (up to %s)\n", sig, inFlight.Load(), drain)
		ctx, cancel := context.WithTimeout(context.Background(), drain)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("stopped")
	}
}
