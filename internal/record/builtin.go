package record

import "sync"

// The built-in catalogue: every record type of Kieker 2.0's common module,
// described here field by field in serialization order (inherited fields
// first, as Kieker's IRL generator orders them). internal/irl's tests check
// these against Kieker's own record descriptions.

// Prefix is the package prefix shared by Kieker's record classes.
const Prefix = "kieker.common.record."

// Names of the types the rest of tracebridge refers to directly.
const (
	KiekerMetadataRecord      = Prefix + "misc.KiekerMetadataRecord"
	RegistryRecord            = Prefix + "misc.RegistryRecord"
	TraceMetadata             = Prefix + "flow.trace.TraceMetadata"
	ApplicationTraceMetadata  = Prefix + "flow.trace.ApplicationTraceMetadata"
	BeforeOperationEvent      = Prefix + "flow.trace.operation.BeforeOperationEvent"
	AfterOperationEvent       = Prefix + "flow.trace.operation.AfterOperationEvent"
	AfterOperationFailedEvent = Prefix + "flow.trace.operation.AfterOperationFailedEvent"
	CallOperationEvent        = Prefix + "flow.trace.operation.CallOperationEvent"
	OperationExecutionRecord  = Prefix + "controlflow.OperationExecutionRecord"
	SplitEvent                = Prefix + "flow.trace.concurrency.SplitEvent"
	JoinEvent                 = Prefix + "flow.trace.concurrency.JoinEvent"
	CPUUtilizationRecord      = Prefix + "system.CPUUtilizationRecord"
)

var (
	builtinOnce    sync.Once
	builtinTypes   []*Type
	builtinAliases map[string]string
)

func fb(name string) Field  { return Field{Name: name, Kind: Bool} }
func fi(name string) Field  { return Field{Name: name, Kind: Int} }
func fl(name string) Field  { return Field{Name: name, Kind: Long} }
func fd(name string) Field  { return Field{Name: name, Kind: Double} }
func fs(name string) Field  { return Field{Name: name, Kind: String} }
func fsa(name string) Field { return Field{Name: name, Kind: String, Array: true} }

func join(groups ...[]Field) []Field {
	var out []Field
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func fields(f ...Field) []Field { return f }

func buildBuiltin() {
	var (
		traceEvent  = fields(fl("timestamp"), fl("traceId"), fi("orderIndex"))
		operation   = join(traceEvent, fields(fs("operationSignature"), fs("classSignature")))
		failed      = join(operation, fields(fs("cause")))
		call        = join(operation, fields(fs("calleeOperationSignature"), fs("calleeClassSignature")))
		payload     = fields(fsa("parameters"), fsa("values"), fi("requestType"))
		objectID    = fields(fi("objectId"))
		callObject  = fields(fi("objectId"), fi("calleeObjectId"))
		iface       = fields(fs("interface"))
		threadEvent = fields(fl("timestamp"), fl("threadId"), fi("orderIndex"), fs("operationSignature"), fs("classSignature"))
		traceMeta   = fields(fl("traceId"), fl("threadId"), fs("sessionId"), fs("hostname"), fl("parentTraceId"), fi("parentOrderId"))
		dbEvent     = fields(fl("timestamp"), fs("classSignature"), fl("traceId"), fi("orderIndex"))
		jvm         = fields(fl("timestamp"), fs("hostname"), fs("vmName"))
		remote      = fields(fs("pattern"))
		sessionEv   = fields(fl("timestamp"), fs("hostname"), fs("sessionId"))
	)
	defs := []struct {
		name   string
		fields []Field
	}{
		{"controlflow.BranchingRecord", fields(fl("timestamp"), fi("branchID"), fi("branchingOutcome"))},
		{"controlflow.OperationExecutionRecord", fields(fs("operationSignature"), fs("sessionId"), fl("traceId"), fl("tin"), fl("tout"), fs("hostname"), fi("eoi"), fi("ess"))},

		{"database.AfterDatabaseEvent", join(dbEvent, fields(fs("returnType"), fs("returnValue")))},
		{"database.BeforeDatabaseEvent", join(dbEvent, fields(fs("parameters"), fs("technology")))},
		{"database.DatabaseFailedEvent", join(dbEvent, fields(fs("cause")))},

		{"flow.thread.AfterFailedThreadBasedEvent", join(threadEvent, fields(fs("cause")))},
		{"flow.thread.AfterThreadBasedEvent", threadEvent},
		{"flow.thread.BeforeThreadBasedEvent", threadEvent},

		{"flow.trace.ApplicationTraceMetadata", join(traceMeta, fields(fs("applicationName")))},
		{"flow.trace.BeforeReceivedRemoteEvent", fields(fl("timestamp"), fl("callerTraceId"), fi("callerOrderIndex"), fl("traceId"), fi("orderIndex"))},
		{"flow.trace.BeforeSentRemoteEvent", fields(fl("timestamp"), fl("traceId"), fi("orderIndex"), fs("technology"))},
		{"flow.trace.ConstructionEvent", join(traceEvent, fields(fs("classSignature"), fi("objectId")))},
		{"flow.trace.TraceMetadata", traceMeta},

		{"flow.trace.concurrency.JoinEvent", join(traceEvent, fields(fl("joinedTraceId")))},
		{"flow.trace.concurrency.SplitEvent", traceEvent},
		{"flow.trace.concurrency.monitor.MonitorEntryEvent", join(traceEvent, fields(fi("lockId")))},
		{"flow.trace.concurrency.monitor.MonitorExitEvent", join(traceEvent, fields(fi("lockId")))},
		{"flow.trace.concurrency.monitor.MonitorNotifyAllEvent", join(traceEvent, fields(fi("lockId")))},
		{"flow.trace.concurrency.monitor.MonitorNotifyEvent", join(traceEvent, fields(fi("lockId")))},
		{"flow.trace.concurrency.monitor.MonitorRequestEvent", join(traceEvent, fields(fi("lockId")))},
		{"flow.trace.concurrency.monitor.MonitorWaitEvent", join(traceEvent, fields(fi("lockId")))},

		{"flow.trace.operation.AfterOperationEvent", operation},
		{"flow.trace.operation.AfterOperationFailedEvent", failed},
		{"flow.trace.operation.BeforeOperationEvent", operation},
		{"flow.trace.operation.CallOperationEvent", call},
		{"flow.trace.operation.EntryLevelBeforeOperationEvent", join(operation, payload)},

		{"flow.trace.operation.constructor.AfterConstructorEvent", operation},
		{"flow.trace.operation.constructor.AfterConstructorFailedEvent", failed},
		{"flow.trace.operation.constructor.BeforeConstructorEvent", operation},
		{"flow.trace.operation.constructor.CallConstructorEvent", call},

		{"flow.trace.operation.constructor.object.AfterConstructorFailedObjectEvent", join(failed, objectID)},
		{"flow.trace.operation.constructor.object.AfterConstructorObjectEvent", join(operation, objectID)},
		{"flow.trace.operation.constructor.object.BeforeConstructorObjectEvent", join(operation, objectID)},
		{"flow.trace.operation.constructor.object.BeforeConstructorObjectInterfaceEvent", join(operation, objectID, iface)},
		{"flow.trace.operation.constructor.object.CallConstructorObjectEvent", join(call, callObject)},

		{"flow.trace.operation.object.AfterOperationFailedObjectEvent", join(failed, objectID)},
		{"flow.trace.operation.object.AfterOperationObjectEvent", join(operation, objectID)},
		{"flow.trace.operation.object.BeforeOperationObjectEvent", join(operation, objectID)},
		{"flow.trace.operation.object.BeforeOperationObjectInterfaceEvent", join(operation, objectID, iface)},
		{"flow.trace.operation.object.CallOperationObjectEvent", join(call, callObject)},
		{"flow.trace.operation.object.EntryLevelBeforeOperationObjectEvent", join(operation, objectID, payload)},

		{"jvm.ClassLoadingRecord", join(jvm, fields(fl("totalLoadedClassCount"), fi("loadedClassCount"), fl("unloadedClassCount")))},
		{"jvm.CompilationRecord", join(jvm, fields(fs("jitCompilerName"), fl("totalCompilationTimeMS")))},
		{"jvm.GCRecord", join(jvm, fields(fs("gcName"), fl("collectionCount"), fl("collectionTimeMS")))},
		{"jvm.MemoryRecord", join(jvm, fields(
			fl("heapMaxBytes"), fl("heapUsedBytes"), fl("heapCommittedBytes"), fl("heapInitBytes"),
			fl("nonHeapMaxBytes"), fl("nonHeapUsedBytes"), fl("nonHeapCommittedBytes"), fl("nonHeapInitBytes"),
			fi("objectPendingFinalizationCount")))},
		{"jvm.ThreadsStatusRecord", join(jvm, fields(fl("threadCount"), fl("daemonThreadCount"), fl("peakThreadCount"), fl("totalStartedThreadCount")))},
		{"jvm.UptimeRecord", join(jvm, fields(fl("uptimeMS")))},

		{"misc.EmptyRecord", nil},
		{"misc.HostApplicationMetaData", fields(fs("systemName"), fs("ipAddress"), fs("hostname"), fs("applicationName"))},
		{"misc.KiekerMetadataRecord", fields(fs("version"), fs("controllerName"), fs("hostname"), fi("experimentId"), fb("debugMode"), fl("timeOffset"), fs("timeUnit"), fl("numberOfRecords"))},
		{"misc.RegistryRecord", fields(fi("id"), fs("string"))},
		{"misc.OperationCallEvent", fields(fs("sourceComponent"), fs("sourceOperation"), fs("targetComponent"), fs("targetOperation"))},
		{"misc.ThreadMetaData", fields(fs("hostname"), fl("threadId"))},
		{"misc.TimestampRecord", fields(fl("timestamp"))},

		{"remotecontrol.ActivationEvent", remote},
		{"remotecontrol.ActivationParameterEvent", join(remote, fields(fs("name"), fsa("values")))},
		{"remotecontrol.AddParameterValueEvent", join(remote, fields(fs("name"), fs("value")))},
		{"remotecontrol.DeactivationEvent", remote},
		{"remotecontrol.RemoveParameterValueEvent", join(remote, fields(fs("name"), fs("value")))},
		{"remotecontrol.UpdateParameterEvent", join(remote, fields(fs("name"), fsa("values")))},

		{"session.SessionEndEvent", sessionEv},
		{"session.SessionStartEvent", sessionEv},

		{"system.CPUUtilizationRecord", fields(fl("timestamp"), fs("hostname"), fs("cpuID"),
			fd("user"), fd("system"), fd("wait"), fd("nice"), fd("irq"), fd("totalUtilization"), fd("idle"))},
		{"system.DiskUsageRecord", fields(fl("timestamp"), fs("hostname"), fs("deviceName"),
			fd("queue"), fd("readBytesPerSecond"), fd("readsPerSecond"), fd("serviceTime"), fd("writeBytesPerSecond"), fd("writesPerSecond"))},
		{"system.LoadAverageRecord", fields(fl("timestamp"), fs("hostname"), fd("oneMinLoadAverage"), fd("fiveMinLoadAverage"), fd("fifteenMinLoadAverage"))},
		{"system.MemSwapUsageRecord", fields(fl("timestamp"), fs("hostname"), fl("memTotal"), fl("memUsed"), fl("memFree"), fl("swapTotal"), fl("swapUsed"), fl("swapFree"))},
		{"system.NetworkUtilizationRecord", fields(fl("timestamp"), fs("hostname"), fs("interfaceName"), fl("speed"),
			fd("txBytesPerSecond"), fd("txCarrierPerSecond"), fd("txCollisionsPerSecond"), fd("txDroppedPerSecond"),
			fd("txErrorsPerSecond"), fd("txOverrunsPerSecond"), fd("txPacketsPerSecond"),
			fd("rxBytesPerSecond"), fd("rxDroppedPerSecond"), fd("rxErrorsPerSecond"), fd("rxFramePerSecond"),
			fd("rxOverrunsPerSecond"), fd("rxPacketsPerSecond"))},
		{"system.ResourceUtilizationRecord", fields(fl("timestamp"), fs("hostname"), fs("resourceName"), fd("utilization"))},
	}
	for _, d := range defs {
		builtinTypes = append(builtinTypes, MustType(Prefix+d.name, d.fields...))
	}

	// Up to Kieker 1.5 (and in the tpmon era) an OperationExecutionRecord
	// was serialized with a leading experimentId, which is dropped on read.
	for _, t := range builtinTypes {
		if t.Name == OperationExecutionRecord {
			t.Legacy = []Layout{{
				Fields: append([]Field{fi("experimentId")}, t.Fields...),
				Target: []int{-1, 0, 1, 2, 3, 4, 5, 6, 7},
			}}
		}
	}

	builtinAliases = map[string]string{
		// Kieker 1.5–1.7 name of TraceMetadata.
		Prefix + "flow.trace.Trace": TraceMetadata,
		// Kieker ≤1.4 kept these records directly in kieker.common.record.
		Prefix + "OperationExecutionRecord":  OperationExecutionRecord,
		Prefix + "BranchingRecord":           Prefix + "controlflow.BranchingRecord",
		Prefix + "CPUUtilizationRecord":      CPUUtilizationRecord,
		Prefix + "MemSwapUsageRecord":        Prefix + "system.MemSwapUsageRecord",
		Prefix + "ResourceUtilizationRecord": Prefix + "system.ResourceUtilizationRecord",
		// The tpmon era (Kieker's predecessor, before 1.0).
		"kieker.tpmon.monitoringRecord.executions.KiekerExecutionRecord": OperationExecutionRecord,
	}
}
