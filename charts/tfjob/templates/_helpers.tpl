{{/*
Names and labels (helm create conventions), plus the derived values of a TFJob.
Everything here mirrors launcher/spec.py and launcher/render.py: the chart is a second
rendering of the same JobSpec, and tests/unit/test_helm_parity.py keeps the two equal.
Every value is emitted through toJson or quote, so no value can inject YAML.
*/}}

{{/*
A free-form value (args, env, command, a path) as JSON for a YAML document: toJson leaves
U+0085 (NEL) raw, which YAML reads as a line break inside a quoted string (a space once
parsed), so it goes as its JSON escape (launcher: render.yaml_json).
*/}}
{{- define "tfjob.json" -}}
{{- toJson . | replace "\u0085" "\\u0085" }}
{{- end }}

{{/* Chart name, for app.kubernetes.io/name. */}}
{{- define "tfjob.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name; truncated at 63 characters (DNS label limit). */}}
{{- define "tfjob.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The TFJob name: jobName (as the launcher's --name) or the fullname. */}}
{{- define "tfjob.jobName" -}}
{{- default (include "tfjob.fullname" .) .Values.jobName }}
{{- end }}

{{/* Chart name and version, for helm.sh/chart. */}}
{{- define "tfjob.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels. app.kubernetes.io/instance is the job name, as in the launcher, so
`-l app.kubernetes.io/instance=NAME` finds a job's pods whichever tool created it.
*/}}
{{- define "tfjob.selectorLabels" -}}
{{- toJson (dict "app.kubernetes.io/name" (include "tfjob.name" .) "app.kubernetes.io/instance" (include "tfjob.jobName" .)) }}
{{- end }}

{{/*
All labels as a JSON object: the user's `labels`, overridden by the standard ones
(launcher: JobSpec.all_labels). No app.kubernetes.io/version: the launcher sets none.
*/}}
{{- define "tfjob.labels" -}}
{{- $labels := deepCopy (.Values.labels | default dict) }}
{{- $labels = merge (include "tfjob.selectorLabels" . | fromJson) $labels }}
{{- $_ := set $labels "app.kubernetes.io/component" "training" }}
{{- $_ = set $labels "app.kubernetes.io/managed-by" .Release.Service }}
{{- $_ = set $labels "helm.sh/chart" (include "tfjob.chart" .) }}
{{- toJson $labels }}
{{- end }}

{{/* The TFJob's own labels (launcher: JobSpec.job_labels): the pods' plus Kueue's queue label. */}}
{{- define "tfjob.jobLabels" -}}
{{- $labels := include "tfjob.labels" . | fromJson }}
{{- with .Values.queueName }}
{{- $_ := set $labels "kueue.x-k8s.io/queue-name" . }}
{{- end }}
{{- toJson $labels }}
{{- end }}

{{/* The ServiceAccount the pods run as; empty means the namespace default. */}}
{{- define "tfjob.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tfjob.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image reference: repository[:tag][@digest]; tag defaults to the appVersion. */}}
{{- define "tfjob.image" -}}
{{- $image := .Values.image }}
{{- $ref := $image.repository }}
{{- $tag := $image.tag | default "" }}
{{- $digest := $image.digest | default "" }}
{{- if and (not $tag) (not $digest) }}
{{- $tag = .Chart.AppVersion }}
{{- end }}
{{- if $tag }}
{{- $ref = printf "%s:%s" $ref $tag }}
{{- end }}
{{- if $digest }}
{{- $ref = printf "%s@%s" $ref $digest }}
{{- end }}
{{- $ref }}
{{- end }}

{{/* Every replica of the job (launcher: JobSpec.total_replicas). */}}
{{- define "tfjob.replicaCount" -}}
{{- $total := 0 }}
{{- range $role := list "chief" "ps" "worker" "evaluator" }}
{{- $total = add $total (int (index $.Values.replicas $role).count) }}
{{- end }}
{{- $total }}
{{- end }}

{{/* runPolicy as JSON (launcher: render.run_policy): unset integers are left out; a job for a
Kueue queue is created suspended. */}}
{{- define "tfjob.runPolicy" -}}
{{- $policy := dict "cleanPodPolicy" .Values.runPolicy.cleanPodPolicy }}
{{- range $key := list "ttlSecondsAfterFinished" "activeDeadlineSeconds" "backoffLimit" }}
{{- $value := index $.Values.runPolicy $key }}
{{- if not (kindIs "invalid" $value) }}
{{- $_ := set $policy $key (int64 $value) }}
{{- end }}
{{- end }}
{{- if .Values.queueName }}
{{- $_ := set $policy "suspend" true }}
{{- end }}
{{- if .Values.gang.enabled }}
{{- $total := include "tfjob.replicaCount" . | int }}
{{- $gang := dict "minAvailable" (int64 (.Values.gang.minAvailable | default $total)) }}
{{- with .Values.gang.queue }}
{{- $_ := set $gang "queue" . }}
{{- end }}
{{- with .Values.priorityClassName }}
{{- $_ := set $gang "priorityClass" . }}
{{- end }}
{{- if not (kindIs "invalid" .Values.gang.timeoutSeconds) }}
{{- $_ := set $gang "scheduleTimeoutSeconds" (int64 .Values.gang.timeoutSeconds) }}
{{- end }}
{{- $_ := set $policy "schedulingPolicy" $gang }}
{{- end }}
{{- toJson $policy }}
{{- end }}

{{/* Container args as JSON (launcher: JobSpec.container_args): --job-dir first. */}}
{{- define "tfjob.args" -}}
{{- $args := list }}
{{- if .Values.jobDir }}
{{- $args = list "--job-dir" .Values.jobDir }}
{{- end }}
{{- $args = concat $args (.Values.args | default list) }}
{{- if $args }}{{ include "tfjob.json" $args }}{{ else }}[]{{ end }}
{{- end }}

{{/* Container env as a JSON list of {name, value}, in the given order (launcher:
JobSpec.container_env): env, PYTHONPATH for packagePath, then secretEnv. */}}
{{- define "tfjob.env" -}}
{{- $env := list }}
{{- range .Values.env }}{{ $env = append $env . }}{{ end }}
{{- with .Values.packagePath }}
{{- $env = append $env (dict "name" "PYTHONPATH" "value" (include "tfjob.packageParent" $)) }}
{{- end }}
{{- range .Values.secretEnv }}
{{- $env = append $env (dict "name" .name "valueFrom" (dict "secretKeyRef" (dict "name" .secretName "key" .key))) }}
{{- end }}
{{- include "tfjob.json" $env }}
{{- end }}

{{/* GPUs per pod of a replica entry (ps has none). Call with the replica dict. */}}
{{- define "tfjob.gpus" -}}
{{- int (.gpus | default 0) }}
{{- end }}

{{/*
The node selector one replica type gives as JSON: nodeSelector, then the replica's own
nodeSelector over it (its keys win, with an empty value too: sprig's merge would fill an
empty value from nodeSelector). Call with (dict "root" $ "replica" $r).
*/}}
{{- define "tfjob.givenNodeSelector" -}}
{{- $selector := deepCopy (.root.Values.nodeSelector | default dict) }}
{{- range $key, $value := (.replica.nodeSelector | default dict) }}
{{- $_ := set $selector $key $value }}
{{- end }}
{{- toJson $selector }}
{{- end }}

{{/*
Node selector of one replica type as JSON (launcher: JobSpec.replica_node_selector):
nodeSelector, then the replica's own nodeSelector, then the accelerator label on GPU roles.
Call with (dict "root" $ "replica" $r).
*/}}
{{- define "tfjob.replicaNodeSelector" -}}
{{- $selector := include "tfjob.givenNodeSelector" . | fromJson }}
{{- if and .root.Values.accelerator (gt (include "tfjob.gpus" .replica | int) 0) }}
{{- $_ := set $selector "cloud.google.com/gke-accelerator" .root.Values.accelerator }}
{{- end }}
{{- toJson $selector }}
{{- end }}

{{/* Resources of one replica entry as JSON (launcher: JobSpec.replica_resources). */}}
{{- define "tfjob.replicaResources" -}}
{{- $requests := dict }}
{{- range $key := list "cpu" "memory" }}
{{- $value := index $ $key }}
{{- if and (not (kindIs "invalid" $value)) (ne (toString $value) "") }}
{{- $_ := set $requests $key (toString $value) }}
{{- end }}
{{- end }}
{{- $resources := dict }}
{{- if $requests }}
{{- $_ := set $resources "requests" $requests }}
{{- end }}
{{- $gpus := include "tfjob.gpus" . | int }}
{{- if gt $gpus 0 }}
{{- $_ := set $resources "limits" (dict "nvidia.com/gpu" (toString $gpus)) }}
{{- end }}
{{- toJson $resources }}
{{- end }}

{{/*
Rules that span several values (launcher: JobSpec._check_replicas, _check_names, _check_node_selectors,
_check_volumes, _check_secret_env, _check_module, _check_gang and the label checks; cli.args.check_job_dir_once,
checks.check_package).
Per-value rules live in values.schema.json, except those the schema can only say with `not`
(helm then prints just "Must not validate the schema"): '..' in a path, a mount path that
hides an image directory, a job dir's bucket that is an IP address or reserved, a blank job dir.
Each failure names the value and the fix.
*/}}
{{- define "tfjob.validate" -}}
{{- $r := .Values.replicas }}
{{- range $role := list "chief" "worker" "evaluator" }}
{{- $replica := index $r $role }}
{{- if and (gt (include "tfjob.gpus" $replica | int) 0) (eq (int $replica.count) 0) }}
{{- fail (printf "replicas.%s.gpus: the job has no %s (replicas.%s.count is 0); set replicas.%s.count%s or replicas.%s.gpus: 0" $role $role $role $role (ternary " >= 1" ": 1" (eq $role "worker")) $role) }}
{{- end }}
{{- end }}
{{- range $role := list "chief" "ps" "worker" "evaluator" }}
{{- $replica := index $r $role }}
{{- range $key := list "cpu" "memory" "nodeSelector" }}
{{- if and (index $replica $key) (eq (int $replica.count) 0) }}
{{- fail (printf "replicas.%s.%s: the job has no %s (replicas.%s.count is 0); set replicas.%s.count or drop replicas.%s.%s" $role $key $role $role $role $role $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- $chief := int $r.chief.count }}
{{- $workers := int $r.worker.count }}
{{- if and (eq $chief 0) (eq $workers 0) }}
{{- fail "replicas: a job needs a chief or at least one worker; set replicas.worker.count >= 1 or replicas.chief.count: 1" }}
{{- end }}
{{- if and (gt (int $r.ps.count) 0) (eq $chief 0) }}
{{- fail "replicas.chief.count: parameter-server training needs a chief as coordinator; set replicas.chief.count: 1" }}
{{- end }}
{{- if and (gt (int $r.ps.count) 0) (eq $workers 0) }}
{{- fail "replicas.worker.count: parameter-server training needs at least one worker to run the steps; set replicas.worker.count >= 1 or replicas.ps.count: 0" }}
{{- end }}
{{- if .Values.accelerator }}
{{- $gpus := 0 }}
{{- range $role := list "chief" "worker" "evaluator" }}
{{- $gpus = add $gpus (include "tfjob.gpus" (index $r $role) | int) }}
{{- end }}
{{- if eq (int $gpus) 0 }}
{{- fail "accelerator: set GPUs too, e.g. replicas.worker.gpus: 1" }}
{{- end }}
{{- end }}
{{- $gpuLabel := "cloud.google.com/gke-accelerator" }}
{{- range $role := list "chief" "ps" "worker" "evaluator" }}
{{- $replica := index $r $role }}
{{- if and (gt (int $replica.count) 0) (eq (include "tfjob.gpus" $replica | int) 0) }}
{{- $field := "" }}
{{- if hasKey ($replica.nodeSelector | default dict) $gpuLabel }}
{{- $field = printf "replicas.%s.nodeSelector" $role }}
{{- else if hasKey ($.Values.nodeSelector | default dict) $gpuLabel }}
{{- $field = "nodeSelector" }}
{{- end }}
{{- if $field }}
{{- fail (printf "%s: %s would put the %s replicas, which have no GPUs, on GPU nodes (tainted: they would never schedule); select the GPU pool per role, e.g. replicas.worker.nodeSelector, or use accelerator" $field $gpuLabel $role) }}
{{- end }}
{{- end }}
{{- if and $.Values.accelerator (gt (include "tfjob.gpus" $replica | int) 0) }}
{{- $selector := include "tfjob.givenNodeSelector" (dict "root" $ "replica" $replica) | fromJson }}
{{- if and (hasKey $selector $gpuLabel) (ne (get $selector $gpuLabel) $.Values.accelerator) }}
{{- $field := ternary (printf "replicas.%s.nodeSelector" $role) "nodeSelector" (hasKey ($replica.nodeSelector | default dict) $gpuLabel) }}
{{- $own := get $selector $gpuLabel | default "\"\"" }}
{{- fail (printf "%s: %s=%s conflicts with accelerator %s; give the GPU type once" $field $gpuLabel $own $.Values.accelerator) }}
{{- end }}
{{- end }}
{{- end }}
{{- $name := include "tfjob.jobName" . }}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $name) }}
{{- fail (printf "jobName: %q is not a DNS-1035 label; set jobName to lowercase letters, digits and '-', starting with a letter" $name) }}
{{- end }}
{{- range $role := list "chief" "ps" "worker" "evaluator" }}
{{- $count := int (index $r $role).count }}
{{- if gt $count 0 }}
{{- $replica := printf "%s-%s-%d" $name $role (sub $count 1) }}
{{- if gt (len $replica) 63 }}
{{- fail (printf "jobName: %q is too long: replica service name %q has %d characters (max 63); set a shorter jobName" $name $replica (len $replica)) }}
{{- end }}
{{- end }}
{{- end }}
{{- if not .Values.gang.enabled }}
{{- if not (kindIs "invalid" .Values.gang.timeoutSeconds) }}
{{- fail "gang.timeoutSeconds: only with gang.enabled; set gang.enabled: true or gang.timeoutSeconds: null" }}
{{- end }}
{{- if .Values.gang.queue }}
{{- fail "gang.queue: only with gang.enabled; set gang.enabled: true or gang.queue: \"\"" }}
{{- end }}
{{- if not (kindIs "invalid" .Values.gang.minAvailable) }}
{{- fail "gang.minAvailable: only with gang.enabled; set gang.enabled: true or gang.minAvailable: null" }}
{{- end }}
{{- end }}
{{- if not .Values.serviceAccount.create }}
{{- if .Values.serviceAccount.gcpServiceAccount }}
{{- fail "serviceAccount.gcpServiceAccount: only with serviceAccount.create, the account it annotates (iam.gke.io/gcp-service-account); set serviceAccount.create: true, or annotate the existing account yourself and set serviceAccount.gcpServiceAccount: \"\"" }}
{{- end }}
{{- if .Values.serviceAccount.annotations }}
{{- fail "serviceAccount.annotations: only with serviceAccount.create, the account they annotate; set serviceAccount.create: true or serviceAccount.annotations: {}" }}
{{- end }}
{{- end }}
{{- if and .Values.gang.enabled (not (kindIs "invalid" .Values.gang.minAvailable)) }}
{{- $total := include "tfjob.replicaCount" . | int }}
{{- if gt (int .Values.gang.minAvailable) $total }}
{{- fail (printf "gang.minAvailable: %d is more than the job's %d replicas; set 1 to %d, or null for all" (int .Values.gang.minAvailable) $total $total) }}
{{- end }}
{{- else if and .Values.gang.enabled (gt (include "tfjob.replicaCount" . | int) 2147483647) }}
{{- fail (printf "gang.minAvailable: the job has %d replicas, more than a gang's minAvailable (an int32) can hold; set gang.minAvailable (at most 2147483647) or use fewer replicas" (include "tfjob.replicaCount" . | int)) }}
{{- end }}
{{- if and .Values.moduleName .Values.command }}
{{- fail "moduleName: conflicts with command; set one of them" }}
{{- end }}
{{- with .Values.packagePath }}
{{- if regexMatch "(^|/)[.][.](/|$)" . }}
{{- fail (printf "packagePath: %q has a '..' segment; give the package's directory as a plain absolute path, e.g. /mnt/code/trainer" .) }}
{{- end }}
{{- if not $.Values.moduleName }}
{{- fail "packagePath: needs moduleName, the module to run from the package (e.g. moduleName: trainer.task)" }}
{{- end }}
{{- if ne (base (trimSuffix "/" .)) (first (splitList "." $.Values.moduleName)) }}
{{- fail (printf "packagePath: the module %s is not in package %q; give the package's own directory" $.Values.moduleName (base (trimSuffix "/" .))) }}
{{- end }}
{{- end }}
{{- $envNames := dict }}
{{- range $i, $entry := .Values.env }}
{{- if hasKey $envNames $entry.name }}
{{- fail (printf "env[%d].name: %q is set twice; give each variable once" $i $entry.name) }}
{{- end }}
{{- if and $.Values.packagePath (eq $entry.name "PYTHONPATH") }}
{{- fail (printf "env[%d].name: PYTHONPATH is set by packagePath (to the package's parent directory); drop one of them" $i) }}
{{- end }}
{{- if and (eq $entry.name "JOB_DIR") (not $.Values.command) (has $.Values.moduleName (list "" "trainer.task")) }}
{{- fail (printf "env[%d].name: JOB_DIR is the trainer's job dir, which the launcher's tensorboard and serve --from-job read from its arguments; set jobDir instead" $i) }}
{{- end }}
{{- $_ := set $envNames $entry.name true }}
{{- end }}
{{- range $i, $entry := .Values.secretEnv }}
{{- if hasKey $envNames $entry.name }}
{{- fail (printf "secretEnv[%d].name: %q is set twice (by env or secretEnv); give each variable once" $i $entry.name) }}
{{- end }}
{{- if and $.Values.packagePath (eq $entry.name "PYTHONPATH") }}
{{- fail (printf "secretEnv[%d].name: PYTHONPATH is set by packagePath (to the package's parent directory); drop one of them" $i) }}
{{- end }}
{{- $_ := set $envNames $entry.name true }}
{{- end }}
{{- range $key := list "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/component" "app.kubernetes.io/managed-by" "helm.sh/chart" }}
{{- if hasKey ($.Values.labels | default dict) $key }}
{{- fail (printf "labels: %s is set by the chart and would be overwritten; drop it or use another key" $key) }}
{{- end }}
{{- end }}
{{- range $key, $_ := (.Values.labels | default dict) }}
{{- if hasPrefix "training.kubeflow.org/" $key }}
{{- fail (printf "labels: %s is the training-operator's: it sets its own on each pod (job name, replica type and index, the master's role); use another key" $key) }}
{{- end }}
{{- end }}
{{- if and .Values.queueName (hasKey (.Values.labels | default dict) "kueue.x-k8s.io/queue-name") }}
{{- fail "labels: kueue.x-k8s.io/queue-name is set by queueName; drop the label" }}
{{- end }}
{{- with .Values.jobDir }}
{{- include "tfjob.checkJobDir" (dict "field" "jobDir" "value" .) }}
{{- end }}
{{- $claims := dict }}
{{- $paths := dict }}
{{- range $i, $volume := .Values.volumes }}
{{- if hasKey $claims $volume.claimName }}
{{- fail (printf "volumes[%d].claimName: claim %q is given twice; mount each claim once" $i $volume.claimName) }}
{{- end }}
{{- if regexMatch "/[.][.](/|$)" $volume.mountPath }}
{{- fail (printf "volumes[%d].mountPath: %q has a '..' segment; give a plain absolute path, e.g. /mnt/data" $i $volume.mountPath) }}
{{- end }}
{{- $path := regexReplaceAll "/+$" $volume.mountPath "" }}
{{- $plain := regexReplaceAll "/+" $path "/" }}
{{- $kernel := regexFind "^/(dev|proc|sys)(/|$)" $plain | trimSuffix "/" }}
{{- if $kernel }}
{{- fail (printf "volumes[%d].mountPath: %q is %s%s, which the container runtime provides; mount the claim elsewhere, e.g. /mnt/data" $i $volume.mountPath (ternary "" "under " (eq $plain $kernel)) $kernel) }}
{{- end }}
{{- if has $plain (list "" "/etc" "/app" "/usr" "/bin" "/sbin" "/lib" "/lib64") }}
{{- fail (printf "volumes[%d].mountPath: %q would hide the image's %s; mount the claim elsewhere, e.g. /mnt/data" $i $volume.mountPath (default "/" $plain)) }}
{{- end }}
{{- if hasKey $paths $path }}
{{- fail (printf "volumes[%d].mountPath: %q is used twice; give each claim its own directory" $i $volume.mountPath) }}
{{- end }}
{{- $_ := set $claims $volume.claimName true }}
{{- $_ := set $paths $path true }}
{{- end }}
{{- $given := include "tfjob.jobDirsInArgs" . | fromJsonArray }}
{{- if and .Values.jobDir $given }}
{{- $first := first $given }}
{{- fail (printf "jobDir: given twice: %q by jobDir and %q by args[%d] (%s); give it once, as jobDir (the chart passes it to the trainer as --job-dir)" .Values.jobDir $first.value (int $first.index) $first.flag) }}
{{- end }}
{{- if gt (len $given) 1 }}
{{- $flags := list }}
{{- range $given }}{{ $flags = append $flags .flag }}{{ end }}
{{- fail (printf "args: the job dir is given %d times (%s); give it once, as jobDir" (len $given) (join ", " $flags)) }}
{{- end }}
{{- with $given }}
{{- $first := first . }}
{{- include "tfjob.checkJobDir" (dict "field" (printf "args[%d] (%s)" (int $first.index) $first.flag) "value" $first.value) }}
{{- end }}
{{- with .Values.packagePath }}
{{- $package := regexReplaceAll "/+" . "/" | trimSuffix "/" }}
{{- $inPods := false }}
{{- range $.Values.volumes }}
{{- $mount := regexReplaceAll "/+" .mountPath "/" | trimSuffix "/" }}
{{- if or (eq $package $mount) (hasPrefix (printf "%s/" $mount) $package) }}
{{- $inPods = true }}
{{- end }}
{{- end }}
{{- if not $inPods }}
{{- fail (printf "packagePath: %s is not in the pods: the chart ships no files; bake the package into the image and give moduleName alone, or put it on a claim and give its path under a volumes mountPath (e.g. volumes: [{claimName: code, mountPath: /mnt/code}] with packagePath: /mnt/code/trainer)" .) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The job dirs given in args (launcher: trainer.flags.job_dir_given), as a JSON list of {flag, value,
index}: each --job-dir, --job_dir, --output_path or --model_dir, as FLAG=VALUE or FLAG VALUE (index:
the argument holding the value).
*/}}
{{- define "tfjob.jobDirsInArgs" -}}
{{- $args := .Values.args | default list }}
{{- $given := list }}
{{- range $i, $arg := $args }}
{{- $flag := first (splitList "=" $arg) }}
{{- if has $flag (list "--job-dir" "--job_dir" "--output_path" "--model_dir") }}
{{- if contains "=" $arg }}
{{- $given = append $given (dict "flag" $flag "value" (trimPrefix (printf "%s=" $flag) $arg) "index" $i) }}
{{- else if lt (add1 $i) (len $args) }}
{{- $given = append $given (dict "flag" $flag "value" (index $args (add1 $i)) "index" (add1 $i)) }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $given }}
{{- end }}

{{/*
What is wrong with a Cloud Storage bucket name, or nothing (launcher: spec._bucket_problem):
3-63 characters, up to 222 with dots and 63 between them; not an IP address nor reserved.
*/}}
{{- define "tfjob.bucketProblem" -}}
{{- $long := ternary 222 63 (contains "." .) }}
{{- $partTooLong := false }}
{{- range splitList "." . }}
{{- if gt (len .) 63 }}{{ $partTooLong = true }}{{ end }}
{{- end }}
{{- if not . }}is empty
{{- else if or (not (regexMatch `^[a-z0-9](?:[-_.a-z0-9]*[a-z0-9])?$` .)) (lt (len .) 3) (gt (len .) $long) $partTooLong }}is not a Cloud Storage bucket name
{{- else if regexMatch `^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$` . }}is an IP address, which Cloud Storage refuses as a bucket name
{{- else if or (hasPrefix "goog" .) (contains "google" .) }}is reserved by Cloud Storage (no "goog" prefix, no "google")
{{- end }}
{{- end }}

{{/*
A job dir (launcher: spec.check_job_dir): gs://BUCKET/path or a local path. For jobDir, which the
schema checks too, it adds the rules the schema can only say with `not` (an IP address or a reserved
name as the bucket, a blank path); a job dir in args gets every rule here. Call with
(dict "field" FIELD "value" VALUE).
*/}}
{{- define "tfjob.checkJobDir" -}}
{{- $dir := .value }}
{{- if hasPrefix "gs://" $dir }}
{{- $rest := trimPrefix "gs://" $dir }}
{{- $bucket := first (splitList "/" $rest) }}
{{- $path := ternary (trimPrefix (printf "%s/" $bucket) $rest) "" (contains "/" $rest) }}
{{- with include "tfjob.bucketProblem" $bucket }}
{{- $fixed := ternary (lower $bucket) "my-bucket" (not (include "tfjob.bucketProblem" (lower $bucket))) }}
{{- fail (printf "%s: %q in %q %s; bucket names are 3-63 lowercase letters, digits, '-', '_' and '.' (up to 222 with dots, 63 between dots), starting and ending with a letter or digit, e.g. gs://%s/%s" $.field $bucket $dir . $fixed (default "runs/1" $path)) }}
{{- end }}
{{- if regexMatch `[\n\r]` $path }}
{{- fail (printf "%s: %q has a line break in its object path, which Cloud Storage refuses; use a path without one" .field $dir) }}
{{- end }}
{{- else if contains "://" $dir }}
{{- fail (printf "%s: %q is not supported; use a local path or gs://BUCKET/path" .field $dir) }}
{{- else if regexMatch `^[\t\n\v\f\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]*$` $dir }}
{{- fail (printf "%s: %s; use a local path or gs://BUCKET/path" .field (ternary "is empty" (printf "%q is blank" $dir) (eq $dir ""))) }}
{{- else if regexMatch `[\n\r\x00]` $dir }}
{{- fail (printf "%s: %q contains a line break or a NUL byte; use a plain local path" .field $dir) }}
{{- end }}
{{- end }}

{{/* The parent of packagePath (launcher: JobSpec.package_parent): PYTHONPATH and workingDir. Every
trailing '/' goes first: dir of /mnt/code/trainer/ is /mnt/code/trainer. */}}
{{- define "tfjob.packageParent" -}}
{{- dir (regexReplaceAll "/+$" .Values.packagePath "") }}
{{- end }}

{{/* The container command (launcher: JobSpec.container_command): python -m moduleName, else command. */}}
{{- define "tfjob.command" -}}
{{- if .Values.moduleName }}{{ toJson (list "python" "-m" .Values.moduleName) }}{{ else if .Values.command }}{{ include "tfjob.json" .Values.command }}{{ end }}
{{- end }}
