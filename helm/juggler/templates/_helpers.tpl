{{- define "juggler.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped name; the release name alone when it already contains the chart's. */}}
{{- define "juggler.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "juggler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "juggler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "juggler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "juggler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "juggler.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* Env shared by the workers and the topic-setup job: where Kafka is and how to
     connect to it (juggler.kafka.client_config reads the JUGGLER_KAFKA_* variables). */}}
{{- define "juggler.kafkaEnv" -}}
{{- $kafka := .Values.kafka -}}
- name: JUGGLER_BOOTSTRAP
  value: {{ required "kafka.bootstrap is required" $kafka.bootstrap | quote }}
- name: JUGGLER_PARTITIONS
  value: {{ .Values.partitions | toString | quote }}
- name: JUGGLER_KAFKA_SECURITY_PROTOCOL
  value: {{ $kafka.securityProtocol | quote }}
{{- if hasPrefix "SASL_" $kafka.securityProtocol }}
- name: JUGGLER_KAFKA_SASL_MECHANISM
  value: {{ required "kafka.sasl.mechanism is required with SASL_*" $kafka.sasl.mechanism | quote }}
- name: JUGGLER_KAFKA_SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ required "kafka.sasl.existingSecret is required with SASL_*" $kafka.sasl.existingSecret | quote }}
      key: {{ $kafka.sasl.usernameKey | quote }}
- name: JUGGLER_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $kafka.sasl.existingSecret | quote }}
      key: {{ $kafka.sasl.passwordKey | quote }}
{{- end }}
{{- if $kafka.tls.existingSecret }}
{{- range $setting, $key := dict "CA" $kafka.tls.caKey "CERTIFICATE" $kafka.tls.certificateKey "KEY" $kafka.tls.keyKey }}
{{- if $key }}
- name: {{ printf "JUGGLER_KAFKA_SSL_%s_LOCATION" $setting }}
  value: {{ printf "/etc/juggler/tls/%s" $key | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The TLS Secret's volume and mount, when there is one. */}}
{{- define "juggler.tlsVolume" -}}
{{- if .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  secret:
    secretName: {{ .Values.kafka.tls.existingSecret | quote }}
{{- end }}
{{- end -}}

{{- define "juggler.tlsMount" -}}
{{- if .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  mountPath: /etc/juggler/tls
  readOnly: true
{{- end }}
{{- end -}}
