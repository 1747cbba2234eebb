"""Every field of the Kubernetes API objects a scenario's workload may hold, and of the objects inside them.

Data, not code: the OpenAPI definitions of Kubernetes release-1.37 (core/v1 Pod and Service, apps/v1 Deployment
and ReplicaSet, and every type they reach), as the kubernetes Python client 37.0.2 carries them in its models'
`attribute_map` and `openapi_types`; discovery.k8s.io/v1 EndpointSlice's, written from the API reference. Each
type maps to its fields, space-separated, each as `name` (a scalar) or `name:SHAPE`: `Type` an object of that
type, `[Type]` a list of them, `[]` a list of scalars, `{}` a map of scalars (labels, resources), `*` anything
(IntOrString, FieldsV1).
"""

from __future__ import annotations

FIELDS: dict[str, str] = {
    # discovery.k8s.io/v1 EndpointSlice and the types it reaches (release-1.37's API reference).
    "EndpointSlice": "addressType apiVersion endpoints:[Endpoint] kind metadata:ObjectMeta ports:[EndpointPort]",
    "Endpoint": (
        "addresses:[] conditions:EndpointConditions deprecatedTopology:{} hints:EndpointHints hostname nodeName "
        "targetRef:ObjectReference zone"
    ),
    "EndpointConditions": "ready serving terminating",
    "EndpointHints": "forNodes:[ForNode] forZones:[ForZone]",
    "EndpointPort": "appProtocol name port protocol",
    "ForNode": "name",
    "ForZone": "name",
    "ObjectReference": "apiVersion fieldPath kind name namespace resourceVersion uid",
    "AWSElasticBlockStoreVolumeSource": "fsType partition readOnly volumeID",
    "Affinity": "nodeAffinity:NodeAffinity podAffinity:PodAffinity podAntiAffinity:PodAntiAffinity",
    "AppArmorProfile": "localhostProfile type",
    "AzureDiskVolumeSource": "cachingMode diskName diskURI fsType kind readOnly",
    "AzureFileVolumeSource": "readOnly secretName shareName",
    "CSIVolumeSource": "driver fsType nodePublishSecretRef:LocalObjectReference readOnly volumeAttributes:{}",
    "Capabilities": "add:[] drop:[]",
    "CephFSVolumeSource": "monitors:[] path readOnly secretFile secretRef:LocalObjectReference user",
    "CinderVolumeSource": "fsType readOnly secretRef:LocalObjectReference volumeID",
    "ClientIPConfig": "timeoutSeconds",
    "ClusterTrustBundleProjection": "labelSelector:LabelSelector name optional path signerName user",
    "Condition": "lastTransitionTime message observedGeneration reason status type",
    "ConfigMapEnvSource": "name optional",
    "ConfigMapKeySelector": "key name optional",
    "ConfigMapProjection": "items:[KeyToPath] name optional",
    "ConfigMapVolumeSource": "defaultMode defaultUser items:[KeyToPath] name optional",
    "Container": (
        "args:[] command:[] env:[EnvVar] envFrom:[EnvFromSource] image imagePullPolicy lifecycle:Lifecycle "
        "livenessProbe:Probe name ports:[ContainerPort] readinessProbe:Probe resizePolicy:[ContainerResizePolicy] "
        "resources:ResourceRequirements restartPolicy restartPolicyRules:[ContainerRestartRule] "
        "securityContext:SecurityContext startupProbe:Probe stdin stdinOnce terminationMessagePath "
        "terminationMessagePolicy tty volumeDevices:[VolumeDevice] volumeMounts:[VolumeMount] workingDir"
    ),
    "ContainerExtendedResourceRequest": "containerName requestName resourceName",
    "ContainerPort": "containerPort hostIP hostPort name protocol",
    "ContainerResizePolicy": "resourceName restartPolicy",
    "ContainerRestartRule": "action exitCodes:ContainerRestartRuleOnExitCodes",
    "ContainerRestartRuleOnExitCodes": "operator values:[]",
    "ContainerState": "running:ContainerStateRunning terminated:ContainerStateTerminated waiting:ContainerStateWaiting",
    "ContainerStateRunning": "startedAt",
    "ContainerStateTerminated": "containerID exitCode finishedAt message reason signal startedAt",
    "ContainerStateWaiting": "message reason",
    "ContainerStatus": (
        "allocatedResources:{} allocatedResourcesStatus:[ResourceStatus] containerID image imageID "
        "lastState:ContainerState name ready resources:ResourceRequirements restartCount started state:ContainerState "
        "stopSignal user:ContainerUser volumeMounts:[VolumeMountStatus]"
    ),
    "ContainerUser": "linux:LinuxContainerUser",
    "Deployment": "apiVersion kind metadata:ObjectMeta spec:DeploymentSpec status:DeploymentStatus",
    "DeploymentCondition": "lastTransitionTime lastUpdateTime message reason status type",
    "DeploymentSpec": (
        "minReadySeconds paused progressDeadlineSeconds replicas revisionHistoryLimit selector:LabelSelector "
        "strategy:DeploymentStrategy template:PodTemplateSpec"
    ),
    "DeploymentStatus": (
        "availableReplicas collisionCount conditions:[DeploymentCondition] observedGeneration readyReplicas replicas "
        "terminatingReplicas unavailableReplicas updatedReplicas"
    ),
    "DeploymentStrategy": "rollingUpdate:RollingUpdateDeployment type",
    "DownwardAPIProjection": "items:[DownwardAPIVolumeFile]",
    "DownwardAPIVolumeFile": "fieldRef:ObjectFieldSelector mode path resourceFieldRef:ResourceFieldSelector user",
    "DownwardAPIVolumeSource": "defaultMode defaultUser items:[DownwardAPIVolumeFile]",
    "EmptyDirVolumeSource": "medium mode sizeLimit",
    "EnvFromSource": "configMapRef:ConfigMapEnvSource prefix secretRef:SecretEnvSource",
    "EnvVar": "name value valueFrom:EnvVarSource",
    "EnvVarSource": (
        "configMapKeyRef:ConfigMapKeySelector fieldRef:ObjectFieldSelector fileKeyRef:FileKeySelector "
        "resourceFieldRef:ResourceFieldSelector secretKeyRef:SecretKeySelector"
    ),
    "EphemeralContainer": (
        "args:[] command:[] env:[EnvVar] envFrom:[EnvFromSource] image imagePullPolicy lifecycle:Lifecycle "
        "livenessProbe:Probe name ports:[ContainerPort] readinessProbe:Probe resizePolicy:[ContainerResizePolicy] "
        "resources:ResourceRequirements restartPolicy restartPolicyRules:[ContainerRestartRule] "
        "securityContext:SecurityContext startupProbe:Probe stdin stdinOnce targetContainerName "
        "terminationMessagePath terminationMessagePolicy tty volumeDevices:[VolumeDevice] volumeMounts:[VolumeMount] "
        "workingDir"
    ),
    "EphemeralVolumeSource": "volumeClaimTemplate:PersistentVolumeClaimTemplate",
    "EvictionResponder": "name priority",
    "ExecAction": "command:[]",
    "FCVolumeSource": "fsType lun readOnly targetWWNs:[] wwids:[]",
    "FileKeySelector": "key optional path volumeName",
    "FlexVolumeSource": "driver fsType options:{} readOnly secretRef:LocalObjectReference",
    "FlockerVolumeSource": "datasetName datasetUUID",
    "GCEPersistentDiskVolumeSource": "fsType partition pdName readOnly",
    "GRPCAction": "mode port service",
    "GitRepoVolumeSource": "directory repository revision",
    "GlusterfsVolumeSource": "endpoints path readOnly",
    "HTTPGetAction": "host httpHeaders:[HTTPHeader] path port:* protocol scheme",
    "HTTPHeader": "name value",
    "HostAlias": "hostnames:[] ip",
    "HostIP": "ip",
    "HostPathVolumeSource": "path type",
    "ISCSIVolumeSource": (
        "chapAuthDiscovery chapAuthSession fsType initiatorName iqn iscsiInterface lun portals:[] readOnly "
        "secretRef:LocalObjectReference targetPortal"
    ),
    "ImageVolumeSource": "pullPolicy reference",
    "ImageVolumeStatus": "imageRef",
    "KeyToPath": "key mode path user",
    "LabelSelector": "matchExpressions:[LabelSelectorRequirement] matchLabels:{}",
    "LabelSelectorRequirement": "key operator values:[]",
    "Lifecycle": "postStart:LifecycleHandler preStop:LifecycleHandler stopSignal",
    "LifecycleHandler": "exec:ExecAction httpGet:HTTPGetAction sleep:SleepAction tcpSocket:TCPSocketAction",
    "LinuxContainerUser": "gid supplementalGroups:[] uid",
    "LoadBalancerIngress": "hostname ip ipMode ports:[PortStatus]",
    "LoadBalancerStatus": "ingress:[LoadBalancerIngress]",
    "LocalObjectReference": "name",
    "ManagedFieldsEntry": "apiVersion fieldsType fieldsV1:* manager operation subresource time",
    "NFSVolumeSource": "path readOnly server",
    "NodeAffinity": (
        "preferredDuringSchedulingIgnoredDuringExecution:[PreferredSchedulingTerm] "
        "requiredDuringSchedulingIgnoredDuringExecution:NodeSelector"
    ),
    "NodeAllocatableMappedResources": "name quantity",
    "NodeAllocatableOverheadResources": "name perContainer perPod",
    "NodeAllocatableResourceClaimStatus": (
        "containers:[] mapping:[NodeAllocatableMappedResources] overhead:[NodeAllocatableOverheadResources] "
        "resourceClaimName"
    ),
    "NodeSelector": "nodeSelectorTerms:[NodeSelectorTerm]",
    "NodeSelectorRequirement": "key operator values:[]",
    "NodeSelectorTerm": "matchExpressions:[NodeSelectorRequirement] matchFields:[NodeSelectorRequirement]",
    "ObjectFieldSelector": "apiVersion fieldPath",
    "ObjectMeta": (
        "annotations:{} creationTimestamp deletionGracePeriodSeconds deletionTimestamp finalizers:[] generateName "
        "generation labels:{} managedFields:[ManagedFieldsEntry] name namespace ownerReferences:[OwnerReference] "
        "resourceVersion selfLink uid"
    ),
    "OwnerReference": "apiVersion blockOwnerDeletion controller kind name uid",
    "PersistentVolumeClaimSpec": (
        "accessModes:[] dataSource:TypedLocalObjectReference dataSourceRef:TypedObjectReference "
        "resources:VolumeResourceRequirements selector:LabelSelector storageClassName volumeAttributesClassName "
        "volumeMode volumeName"
    ),
    "PersistentVolumeClaimTemplate": "metadata:ObjectMeta spec:PersistentVolumeClaimSpec",
    "PersistentVolumeClaimVolumeSource": "claimName readOnly",
    "PhotonPersistentDiskVolumeSource": "fsType pdID",
    "Pod": "apiVersion kind metadata:ObjectMeta spec:PodSpec status:PodStatus",
    "PodAffinity": (
        "preferredDuringSchedulingIgnoredDuringExecution:[WeightedPodAffinityTerm] "
        "requiredDuringSchedulingIgnoredDuringExecution:[PodAffinityTerm]"
    ),
    "PodAffinityTerm": (
        "labelSelector:LabelSelector matchLabelKeys:[] mismatchLabelKeys:[] namespaceSelector:LabelSelector "
        "namespaces:[] topologyKey"
    ),
    "PodAntiAffinity": (
        "preferredDuringSchedulingIgnoredDuringExecution:[WeightedPodAffinityTerm] "
        "requiredDuringSchedulingIgnoredDuringExecution:[PodAffinityTerm]"
    ),
    "PodCertificateProjection": (
        "certificateChainPath credentialBundlePath keyPath keyType maxExpirationSeconds signerName user "
        "userAnnotations:{}"
    ),
    "PodCondition": "lastProbeTime lastTransitionTime message observedGeneration reason status type",
    "PodDNSConfig": "nameservers:[] options:[PodDNSConfigOption] searches:[]",
    "PodDNSConfigOption": "name value",
    "PodExtendedResourceClaimStatus": "requestMappings:[ContainerExtendedResourceRequest] resourceClaimName",
    "PodIP": "ip",
    "PodOS": "name",
    "PodReadinessGate": "conditionType",
    "PodResourceClaim": "name resourceClaimName resourceClaimTemplateName",
    "PodResourceClaimStatus": "name resourceClaimName",
    "PodSchedulingGate": "name",
    "PodSchedulingGroup": "podGroupName",
    "PodSecurityContext": (
        "appArmorProfile:AppArmorProfile fsGroup fsGroupChangePolicy runAsGroup runAsNonRoot runAsUser "
        "seLinuxChangePolicy seLinuxOptions:SELinuxOptions seccompProfile:SeccompProfile supplementalGroups:[] "
        "supplementalGroupsPolicy sysctls:[Sysctl] windowsOptions:WindowsSecurityContextOptions"
    ),
    "PodSpec": (
        "activeDeadlineSeconds affinity:Affinity automountServiceAccountToken containers:[Container] "
        "dnsConfig:PodDNSConfig dnsPolicy enableServiceLinks ephemeralContainers:[EphemeralContainer] "
        "evictionResponders:[EvictionResponder] hostAliases:[HostAlias] hostIPC hostNetwork hostPID hostUsers "
        "hostname hostnameOverride imagePullSecrets:[LocalObjectReference] initContainers:[Container] nodeName "
        "nodeSelector:{} os:PodOS overhead:{} preemptionPolicy priority priorityClassName "
        "readinessGates:[PodReadinessGate] resourceClaims:[PodResourceClaim] resources:ResourceRequirements "
        "restartPolicy runtimeClassName schedulerName schedulingGates:[PodSchedulingGate] "
        "schedulingGroup:PodSchedulingGroup securityContext:PodSecurityContext serviceAccount serviceAccountName "
        "setHostnameAsFQDN shareProcessNamespace subdomain terminationGracePeriodSeconds tolerations:[Toleration] "
        "topologySpreadConstraints:[TopologySpreadConstraint] volumes:[Volume]"
    ),
    "PodStatus": (
        "allocatedResources:{} conditions:[PodCondition] containerStatuses:[ContainerStatus] "
        "ephemeralContainerStatuses:[ContainerStatus] extendedResourceClaimStatus:PodExtendedResourceClaimStatus "
        "hostIP hostIPs:[HostIP] initContainerStatuses:[ContainerStatus] message "
        "nodeAllocatableResourceClaimStatuses:[NodeAllocatableResourceClaimStatus] nominatedNodeName "
        "observedGeneration phase podIP podIPs:[PodIP] qosClass reason resize "
        "resourceClaimStatuses:[PodResourceClaimStatus] resources:ResourceRequirements startTime "
        "volumeHealth:[PodVolumeHealth]"
    ),
    "PodTemplateSpec": "metadata:ObjectMeta spec:PodSpec",
    "PodVolumeHealth": "healthConditions:[VolumeHealthCondition] lastTransitionTime name",
    "PortStatus": "error port protocol",
    "PortworxVolumeSource": "fsType readOnly volumeID",
    "PreferredSchedulingTerm": "preference:NodeSelectorTerm weight",
    "Probe": (
        "exec:ExecAction failureThreshold grpc:GRPCAction httpGet:HTTPGetAction initialDelaySeconds periodSeconds "
        "successThreshold tcpSocket:TCPSocketAction terminationGracePeriodSeconds timeoutSeconds"
    ),
    "ProjectedVolumeSource": "defaultMode defaultUser sources:[VolumeProjection]",
    "QuobyteVolumeSource": "group readOnly registry tenant user volume",
    "RBDVolumeSource": "fsType image keyring monitors:[] pool readOnly secretRef:LocalObjectReference user",
    "ReplicaSet": "apiVersion kind metadata:ObjectMeta spec:ReplicaSetSpec status:ReplicaSetStatus",
    "ReplicaSetCondition": "lastTransitionTime message reason status type",
    "ReplicaSetSpec": "minReadySeconds replicas selector:LabelSelector template:PodTemplateSpec",
    "ReplicaSetStatus": (
        "availableReplicas conditions:[ReplicaSetCondition] fullyLabeledReplicas observedGeneration readyReplicas "
        "replicas terminatingReplicas"
    ),
    "ResourceClaim": "name request",
    "ResourceFieldSelector": "containerName divisor resource",
    "ResourceHealth": "health message resourceID",
    "ResourceRequirements": "claims:[ResourceClaim] limits:{} requests:{}",
    "ResourceStatus": "name resources:[ResourceHealth]",
    "RollingUpdateDeployment": "maxSurge:* maxUnavailable:*",
    "SELinuxOptions": "level role type user",
    "ScaleIOVolumeSource": (
        "fsType gateway protectionDomain readOnly secretRef:LocalObjectReference sslEnabled storageMode storagePool "
        "system volumeName"
    ),
    "SeccompProfile": "localhostProfile type",
    "SecretEnvSource": "name optional",
    "SecretKeySelector": "key name optional",
    "SecretProjection": "items:[KeyToPath] name optional",
    "SecretVolumeSource": "defaultMode defaultUser items:[KeyToPath] optional secretName",
    "SecurityContext": (
        "allowPrivilegeEscalation appArmorProfile:AppArmorProfile capabilities:Capabilities privileged procMount "
        "readOnlyRootFilesystem runAsGroup runAsNonRoot runAsUser seLinuxOptions:SELinuxOptions "
        "seccompProfile:SeccompProfile windowsOptions:WindowsSecurityContextOptions"
    ),
    "Service": "apiVersion kind metadata:ObjectMeta spec:ServiceSpec status:ServiceStatus",
    "ServiceAccountTokenProjection": "audience expirationSeconds path user",
    "ServicePort": "appProtocol name nodePort port protocol targetPort:*",
    "ServiceSpec": (
        "allocateLoadBalancerNodePorts clusterIP clusterIPs:[] externalIPs:[] externalName externalTrafficPolicy "
        "healthCheckNodePort internalTrafficPolicy ipFamilies:[] ipFamilyPolicy loadBalancerClass loadBalancerIP "
        "loadBalancerSourceRanges:[] ports:[ServicePort] publishNotReadyAddresses selector:{} sessionAffinity "
        "sessionAffinityConfig:SessionAffinityConfig trafficDistribution type"
    ),
    "ServiceStatus": "conditions:[Condition] loadBalancer:LoadBalancerStatus",
    "SessionAffinityConfig": "clientIP:ClientIPConfig",
    "SleepAction": "seconds",
    "StorageOSVolumeSource": "fsType readOnly secretRef:LocalObjectReference volumeName volumeNamespace",
    "Sysctl": "name value",
    "TCPSocketAction": "host port:*",
    "Toleration": "effect key operator tolerationSeconds value",
    "TopologySpreadConstraint": (
        "labelSelector:LabelSelector matchLabelKeys:[] maxSkew minDomains nodeAffinityPolicy nodeTaintsPolicy "
        "topologyKey whenUnsatisfiable"
    ),
    "TypedLocalObjectReference": "apiGroup kind name",
    "TypedObjectReference": "apiGroup kind name namespace",
    "Volume": (
        "awsElasticBlockStore:AWSElasticBlockStoreVolumeSource azureDisk:AzureDiskVolumeSource "
        "azureFile:AzureFileVolumeSource cephfs:CephFSVolumeSource cinder:CinderVolumeSource "
        "configMap:ConfigMapVolumeSource csi:CSIVolumeSource downwardAPI:DownwardAPIVolumeSource "
        "emptyDir:EmptyDirVolumeSource ephemeral:EphemeralVolumeSource fc:FCVolumeSource flexVolume:FlexVolumeSource "
        "flocker:FlockerVolumeSource gcePersistentDisk:GCEPersistentDiskVolumeSource gitRepo:GitRepoVolumeSource "
        "glusterfs:GlusterfsVolumeSource hostPath:HostPathVolumeSource image:ImageVolumeSource "
        "iscsi:ISCSIVolumeSource name nfs:NFSVolumeSource persistentVolumeClaim:PersistentVolumeClaimVolumeSource "
        "photonPersistentDisk:PhotonPersistentDiskVolumeSource portworxVolume:PortworxVolumeSource "
        "projected:ProjectedVolumeSource quobyte:QuobyteVolumeSource rbd:RBDVolumeSource scaleIO:ScaleIOVolumeSource "
        "secret:SecretVolumeSource storageos:StorageOSVolumeSource vsphereVolume:VsphereVirtualDiskVolumeSource"
    ),
    "VolumeDevice": "devicePath name",
    "VolumeHealthCondition": "message reason status",
    "VolumeMount": "bindMountOptions:[] mountPath mountPropagation name readOnly recursiveReadOnly subPath subPathExpr",
    "VolumeMountStatus": "mountPath name readOnly recursiveReadOnly volumeStatus:VolumeStatus",
    "VolumeProjection": (
        "clusterTrustBundle:ClusterTrustBundleProjection configMap:ConfigMapProjection "
        "downwardAPI:DownwardAPIProjection podCertificate:PodCertificateProjection secret:SecretProjection "
        "serviceAccountToken:ServiceAccountTokenProjection"
    ),
    "VolumeResourceRequirements": "limits:{} requests:{}",
    "VolumeStatus": "image:ImageVolumeStatus",
    "VsphereVirtualDiskVolumeSource": "fsType storagePolicyID storagePolicyName volumePath",
    "WeightedPodAffinityTerm": "podAffinityTerm:PodAffinityTerm weight",
    "WindowsSecurityContextOptions": "gmsaCredentialSpec gmsaCredentialSpecName hostProcess runAsUserName",
}
