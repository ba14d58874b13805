package frontend

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	adminpb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"

	"bighive/client"
	"bighive/internal/apierr"
	"bighive/internal/limits"
)

// The table admin service maps each method onto the Bighive client's
// schema calls, which go to the master leader with the client's retries.
// Backups, RestoreTable and CopyBackup are in backup.go. Methods not overridden
// (snapshots, authorized and materialized views, IAM,
// UpdateTable, UndeleteTable) answer
// Unimplemented from the embedded UnimplementedBigtableTableAdminServer,
// whose message names the method.

// consistencyToken is the one token GenerateConsistencyToken hands out.
// Every write Bighive acknowledges is already durable and visible to every
// reader (a tablet has one serving replica and the write is logged before
// the reply), and there is no replication between clusters to wait for, so
// the token is consistent the moment it is made.
const consistencyToken = "bighive-consistent-on-ack"

// CreateTable creates a table with its column families (and their GC
// rules), if any, and initial splits.
func (a *adminServer) CreateTable(ctx context.Context, req *adminpb.CreateTableRequest) (*adminpb.Table, error) {
	resp, err := a.createTable(ctx, req)
	if err != nil {
		return nil, a.s.apiErr(ctx, tableCall("CreateTable", req.GetParent()+"/tables/"+req.GetTableId()), err)
	}
	return resp, nil
}

func (a *adminServer) createTable(ctx context.Context, req *adminpb.CreateTableRequest) (*adminpb.Table, error) {
	parent, err := parseInstance(req.GetParent())
	if err != nil {
		return nil, err
	}
	if req.GetTableId() == "" {
		return nil, reqErr(codes.InvalidArgument, "table_id is empty")
	}
	n := tableName{project: parent.project, instance: parent.instance, table: req.GetTableId()}
	spec := client.TableSpec{Name: n.table, Granularity: client.GranularityMillis}
	switch g := req.GetTable().GetGranularity(); g {
	case adminpb.Table_TIMESTAMP_GRANULARITY_UNSPECIFIED, adminpb.Table_MILLIS:
		// Unspecified is MILLIS, as in Cloud Bigtable.
	case adminpb.Table_MICROS:
		spec.Granularity = client.GranularityMicros
	default:
		return nil, reqErr(codes.InvalidArgument, "unknown timestamp granularity %v", g)
	}
	fams := req.GetTable().GetColumnFamilies()
	for _, id := range sortedKeys(fams) {
		cf := fams[id]
		f := client.FamilySpec{Name: id}
		if f.Aggregate, err = aggregateFromAdmin(cf.GetValueType()); err != nil {
			return nil, reqErr(codes.InvalidArgument, "column family %q: %v", id, err)
		}
		if r := cf.GetGcRule(); r != nil && r.GetRule() != nil {
			if f.GCPolicy, err = policyFromAdmin(r); err != nil {
				return nil, reqErr(codes.InvalidArgument, "column family %q: %v", id, err)
			}
		}
		spec.Families = append(spec.Families, f)
	}
	for _, s := range req.GetInitialSplits() {
		spec.SplitKeys = append(spec.SplitKeys, string(s.GetKey()))
	}
	if err := a.s.c.CreateTable(ctx, spec); err != nil {
		return nil, err
	}
	a.s.forget(n.table)
	a.s.log.Info("frontend: created table", "table", n.table, "families", len(spec.Families), "splits", len(spec.SplitKeys))
	return a.getTable(ctx, n, adminpb.Table_SCHEMA_VIEW)
}

// GetTable describes a table: its name alone for NAME_ONLY, and its name,
// timestamp granularity and column families with their GC rules for every
// other view.
func (a *adminServer) GetTable(ctx context.Context, req *adminpb.GetTableRequest) (*adminpb.Table, error) {
	resp, err := a.getTableReq(ctx, req)
	if err != nil {
		return nil, a.s.apiErr(ctx, tableCall("GetTable", req.GetName()), err)
	}
	return resp, nil
}

func (a *adminServer) getTableReq(ctx context.Context, req *adminpb.GetTableRequest) (*adminpb.Table, error) {
	n, err := parseTable(req.GetName())
	if err != nil {
		return nil, err
	}
	return a.getTable(ctx, n, req.GetView())
}

func (a *adminServer) getTable(ctx context.Context, n tableName, view adminpb.Table_View) (*adminpb.Table, error) {
	info, err := a.describe(ctx, n)
	if err != nil {
		return nil, err
	}
	return tableProto(n, info, view), nil
}

// describe returns a table's description, NotFound if there is none.
func (a *adminServer) describe(ctx context.Context, n tableName) (client.TableInfo, error) {
	infos, err := a.s.c.DescribeTables(ctx)
	if err != nil {
		return client.TableInfo{}, err
	}
	for _, t := range infos {
		if t.Name == n.table {
			return t, nil
		}
	}
	return client.TableInfo{}, errNoTable
}

// ListTables lists the tables (the same ones under every instance name),
// sorted, in pages of page_size when it is set; the view is NAME_ONLY
// unless the request asks for more.
func (a *adminServer) ListTables(ctx context.Context, req *adminpb.ListTablesRequest) (*adminpb.ListTablesResponse, error) {
	resp, err := a.listTables(ctx, req)
	if err != nil {
		return nil, a.s.apiErr(ctx, instanceCall("ListTables", req.GetParent()), err)
	}
	return resp, nil
}

func (a *adminServer) listTables(ctx context.Context, req *adminpb.ListTablesRequest) (*adminpb.ListTablesResponse, error) {
	parent, err := parseInstance(req.GetParent())
	if err != nil {
		return nil, err
	}
	if req.GetPageSize() < 0 {
		return nil, reqErr(codes.InvalidArgument, "page_size %d is negative", req.GetPageSize())
	}
	infos, err := a.s.c.DescribeTables(ctx) // sorted by name
	if err != nil {
		return nil, err
	}
	view := req.GetView()
	if view == adminpb.Table_VIEW_UNSPECIFIED {
		view = adminpb.Table_NAME_ONLY
	}
	resp := &adminpb.ListTablesResponse{}
	for _, t := range infos {
		if req.GetPageToken() != "" && t.Name <= req.GetPageToken() {
			continue // the page token is the last name of the previous page
		}
		if ps := int(req.GetPageSize()); ps > 0 && len(resp.Tables) == ps {
			resp.NextPageToken = resp.Tables[ps-1].Name[strings.LastIndex(resp.Tables[ps-1].Name, "/")+1:]
			break
		}
		n := tableName{project: parent.project, instance: parent.instance, table: t.Name}
		resp.Tables = append(resp.Tables, tableProto(n, t, view))
	}
	return resp, nil
}

// DeleteTable deletes a table and its data.
func (a *adminServer) DeleteTable(ctx context.Context, req *adminpb.DeleteTableRequest) (*emptypb.Empty, error) {
	resp, err := a.deleteTable(ctx, req)
	if err != nil {
		return nil, a.s.apiErr(ctx, tableCall("DeleteTable", req.GetName()), err)
	}
	return resp, nil
}

func (a *adminServer) deleteTable(ctx context.Context, req *adminpb.DeleteTableRequest) (*emptypb.Empty, error) {
	n, err := parseTable(req.GetName())
	if err != nil {
		return nil, err
	}
	err = a.s.c.DeleteTable(ctx, n.table)
	a.s.forget(n.table)
	if err != nil {
		return nil, err
	}
	a.s.log.Info("frontend: deleted table", "table", n.table)
	return &emptypb.Empty{}, nil
}

// ModifyColumnFamilies applies the modifications in order: create (with
// its GC rule), update of the GC rule, drop. Every modification is checked
// before the first is applied, but they are not applied atomically: if one
// fails, the ones before it stay applied and the error names the failing
// one. It returns the table as SCHEMA_VIEW.
func (a *adminServer) ModifyColumnFamilies(ctx context.Context, req *adminpb.ModifyColumnFamiliesRequest) (*adminpb.Table, error) {
	resp, err := a.modifyColumnFamilies(ctx, req)
	if err != nil {
		return nil, a.s.apiErr(ctx, tableCall("ModifyColumnFamilies", req.GetName()), err)
	}
	return resp, nil
}

func (a *adminServer) modifyColumnFamilies(ctx context.Context, req *adminpb.ModifyColumnFamiliesRequest) (*adminpb.Table, error) {
	n, err := parseTable(req.GetName())
	if err != nil {
		return nil, err
	}
	mods := req.GetModifications()
	if len(mods) == 0 {
		return nil, reqErr(codes.InvalidArgument, "no modification given")
	}
	type step struct {
		id     string
		kind   string // "create", "update" or "drop"
		policy client.GCPolicy
		agg    client.Aggregate // of a create
		// unserved is the refusal of what Bighive cannot do (a value type,
		// an update of another field than gc_rule), given once the family
		// is known to exist: a missing family is NotFound first.
		unserved error
	}
	steps := make([]step, 0, len(mods))
	for i, m := range mods {
		st := step{id: m.GetId()}
		if st.id == "" {
			return nil, reqErr(codes.InvalidArgument, "modification %d has no id", i)
		}
		var cf *adminpb.ColumnFamily
		switch mod := m.GetMod().(type) {
		case *adminpb.ModifyColumnFamiliesRequest_Modification_Create:
			st.kind, cf = "create", mod.Create
		case *adminpb.ModifyColumnFamiliesRequest_Modification_Update:
			st.kind, cf = "update", mod.Update
			paths := m.GetUpdateMask().GetPaths()
			for _, p := range paths {
				if p == "value_type" && st.unserved == nil {
					st.unserved = reqErr(codes.InvalidArgument, "modification %d changes the value type of column family %q; a value type is set at the family's creation and is immutable afterwards", i, st.id)
				}
				if p != "gc_rule" && st.unserved == nil {
					st.unserved = reqErr(codes.InvalidArgument, "modification %d updates %q of column family %q; Bighive updates gc_rule only", i, p, st.id)
				}
			}
			if len(paths) == 0 && mod.Update.GetValueType() != nil && st.unserved == nil {
				st.unserved = reqErr(codes.InvalidArgument, "modification %d gives column family %q a value type; a value type is set at the family's creation and is immutable afterwards", i, st.id)
			}
		case *adminpb.ModifyColumnFamiliesRequest_Modification_Drop:
			if !mod.Drop {
				return nil, reqErr(codes.InvalidArgument, "modification %d has drop=false", i)
			}
			st.kind = "drop"
		default:
			return nil, reqErr(codes.InvalidArgument, "modification %d (column family %q) sets none of create, update and drop", i, st.id)
		}
		if st.kind == "create" {
			if st.agg, err = aggregateFromAdmin(cf.GetValueType()); err != nil {
				return nil, reqErr(codes.InvalidArgument, "modification %d (column family %q): %v", i, st.id, err)
			}
		}
		if r := cf.GetGcRule(); r != nil && r.GetRule() != nil {
			if st.policy, err = policyFromAdmin(r); err != nil {
				return nil, reqErr(codes.InvalidArgument, "modification %d (column family %q): %v", i, st.id, err)
			}
		} else if st.kind == "update" {
			st.policy = client.NoGcPolicy()
		}
		steps = append(steps, st)
	}
	info, err := a.describe(ctx, n)
	if err != nil {
		return nil, err
	}
	// Play the steps over the families the table has now, so that a step on
	// a missing family (or a create of a present one) fails before any is
	// applied; a concurrent change is still caught by the master.
	has := map[string]bool{}
	for _, f := range info.Families {
		has[f.Name] = true
	}
	for i, st := range steps {
		switch {
		case st.kind == "create" && has[st.id]:
			return nil, reqErr(codes.AlreadyExists, "modification %d creates column family %q, which exists", i, st.id)
		case st.kind != "create" && !has[st.id]:
			return nil, reqErr(codes.NotFound, "modification %d (%s) names column family %q, which does not exist", i, st.kind, st.id)
		case st.unserved != nil:
			return nil, st.unserved
		}
		has[st.id] = st.kind != "drop"
	}
	for _, st := range steps {
		var err error
		switch st.kind {
		case "create":
			err = a.s.c.CreateColumnFamilyWithSpec(ctx, n.table, client.FamilySpec{Name: st.id, Aggregate: st.agg})
			if err == nil && st.policy != nil {
				err = a.s.c.SetGCPolicy(ctx, n.table, st.id, st.policy)
			}
		case "update":
			err = a.s.c.SetGCPolicy(ctx, n.table, st.id, st.policy)
		case "drop":
			err = a.s.c.DeleteColumnFamily(ctx, n.table, st.id)
		}
		if err != nil {
			return nil, err
		}
		a.s.log.Info("frontend: modified column family", "table", n.table, "family", st.id, "change", st.kind)
	}
	return a.getTable(ctx, n, adminpb.Table_SCHEMA_VIEW)
}

// DropRowRange deletes the rows with a key prefix, or every row.
func (a *adminServer) DropRowRange(ctx context.Context, req *adminpb.DropRowRangeRequest) (*emptypb.Empty, error) {
	resp, err := a.dropRowRange(ctx, req)
	if err != nil {
		return nil, a.s.apiErr(ctx, tableCall("DropRowRange", req.GetName()), err)
	}
	return resp, nil
}

func (a *adminServer) dropRowRange(ctx context.Context, req *adminpb.DropRowRangeRequest) (*emptypb.Empty, error) {
	n, err := parseTable(req.GetName())
	if err != nil {
		return nil, err
	}
	switch t := req.GetTarget().(type) {
	case *adminpb.DropRowRangeRequest_RowKeyPrefix:
		if len(t.RowKeyPrefix) == 0 {
			return nil, reqErr(codes.InvalidArgument, "row_key_prefix is empty; set delete_all_data_from_table to drop every row")
		}
		err = a.s.c.DropRowRange(ctx, n.table, string(t.RowKeyPrefix))
	case *adminpb.DropRowRangeRequest_DeleteAllDataFromTable:
		if !t.DeleteAllDataFromTable {
			return nil, reqErr(codes.InvalidArgument, "delete_all_data_from_table is false")
		}
		err = a.s.c.DropAllRows(ctx, n.table)
	default:
		return nil, reqErr(codes.InvalidArgument, "set row_key_prefix or delete_all_data_from_table")
	}
	if err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// GenerateConsistencyToken returns a token for a table. A write Bighive
// acknowledges is already durable and visible to every later read, and a
// Bighive cluster has no replicas to catch up, so every token is consistent
// at once (see CheckConsistency).
func (a *adminServer) GenerateConsistencyToken(ctx context.Context, req *adminpb.GenerateConsistencyTokenRequest) (*adminpb.GenerateConsistencyTokenResponse, error) {
	resp, err := a.generateConsistencyToken(ctx, req)
	if err != nil {
		return nil, a.s.apiErr(ctx, tableCall("GenerateConsistencyToken", req.GetName()), err)
	}
	return resp, nil
}

func (a *adminServer) generateConsistencyToken(ctx context.Context, req *adminpb.GenerateConsistencyTokenRequest) (*adminpb.GenerateConsistencyTokenResponse, error) {
	n, err := parseTable(req.GetName())
	if err != nil {
		return nil, err
	}
	if _, err := a.describe(ctx, n); err != nil {
		return nil, err
	}
	return &adminpb.GenerateConsistencyTokenResponse{ConsistencyToken: consistencyToken}, nil
}

// CheckConsistency answers consistent for every token
// GenerateConsistencyToken made: the writes before it were durable when
// acknowledged. Any other token is InvalidArgument.
func (a *adminServer) CheckConsistency(ctx context.Context, req *adminpb.CheckConsistencyRequest) (*adminpb.CheckConsistencyResponse, error) {
	resp, err := a.checkConsistency(ctx, req)
	if err != nil {
		return nil, a.s.apiErr(ctx, tableCall("CheckConsistency", req.GetName()), err)
	}
	return resp, nil
}

func (a *adminServer) checkConsistency(ctx context.Context, req *adminpb.CheckConsistencyRequest) (*adminpb.CheckConsistencyResponse, error) {
	n, err := parseTable(req.GetName())
	if err != nil {
		return nil, err
	}
	if req.GetConsistencyToken() != consistencyToken {
		return nil, reqErr(codes.InvalidArgument, "unknown consistency token %q; get one from GenerateConsistencyToken", req.GetConsistencyToken())
	}
	if _, err := a.describe(ctx, n); err != nil {
		return nil, err
	}
	return &adminpb.CheckConsistencyResponse{Consistent: true}, nil
}

// tableProto is a table as the admin API shows it in view.
func tableProto(n tableName, info client.TableInfo, view adminpb.Table_View) *adminpb.Table {
	t := &adminpb.Table{Name: n.String()}
	if view == adminpb.Table_NAME_ONLY {
		return t
	}
	t.Granularity = adminpb.Table_MICROS
	if info.Granularity == client.GranularityMillis {
		t.Granularity = adminpb.Table_MILLIS
	}
	t.ColumnFamilies = make(map[string]*adminpb.ColumnFamily, len(info.Families))
	for _, f := range info.Families {
		t.ColumnFamilies[f.Name] = &adminpb.ColumnFamily{GcRule: familyRule(f), ValueType: aggregateToAdmin(f.Aggregate)}
	}
	return t
}

// aggregateFromAdmin converts a column family's value type: none is a
// plain family; an Aggregate of an Int64 input (big-endian encoding, or
// none given, which the API's clients fill in as big-endian) with sum,
// min or max is an aggregate family. HyperLogLog++ is refused: its state
// is a sketch format of Cloud Bigtable's own, which no client library
// reads back, so Bighive could not return it as Cloud Bigtable does.
func aggregateFromAdmin(t *adminpb.Type) (client.Aggregate, error) {
	if t == nil || t.GetKind() == nil {
		return client.NoAggregate, nil
	}
	agg := t.GetAggregateType()
	if agg == nil {
		return 0, fmt.Errorf("value type %T is not supported: only an Aggregate type (int64 sum, min or max) is", t.GetKind())
	}
	in := agg.GetInputType()
	i64 := in.GetInt64Type()
	if i64 == nil {
		return 0, fmt.Errorf("aggregate input type %T is not supported: the input must be Int64", in.GetKind())
	}
	switch e := i64.GetEncoding().GetEncoding().(type) {
	case nil, *adminpb.Type_Int64_Encoding_BigEndianBytes_:
	default:
		return 0, fmt.Errorf("Int64 encoding %T is not supported: use big_endian_bytes", e)
	}
	switch x := agg.GetAggregator().(type) {
	case *adminpb.Type_Aggregate_Sum_:
		return client.AggregateSum, nil
	case *adminpb.Type_Aggregate_Min_:
		return client.AggregateMin, nil
	case *adminpb.Type_Aggregate_Max_:
		return client.AggregateMax, nil
	case *adminpb.Type_Aggregate_HllppUniqueCount:
		return 0, fmt.Errorf("the HyperLogLog++ unique-count aggregator is not supported (no client library reads its state back)")
	default:
		return 0, fmt.Errorf("aggregator %T is not supported: use sum, min or max", x)
	}
}

// aggregateToAdmin is the value type of a family (nil: a plain one), with
// its state type filled in as the API's output does.
func aggregateToAdmin(a client.Aggregate) *adminpb.Type {
	agg := &adminpb.Type_Aggregate{}
	switch a {
	case client.AggregateSum:
		agg.Aggregator = &adminpb.Type_Aggregate_Sum_{Sum: &adminpb.Type_Aggregate_Sum{}}
	case client.AggregateMin:
		agg.Aggregator = &adminpb.Type_Aggregate_Min_{Min: &adminpb.Type_Aggregate_Min{}}
	case client.AggregateMax:
		agg.Aggregator = &adminpb.Type_Aggregate_Max_{Max: &adminpb.Type_Aggregate_Max{}}
	default:
		return nil
	}
	int64BE := func() *adminpb.Type {
		return &adminpb.Type{Kind: &adminpb.Type_Int64Type{Int64Type: &adminpb.Type_Int64{Encoding: &adminpb.Type_Int64_Encoding{
			Encoding: &adminpb.Type_Int64_Encoding_BigEndianBytes_{BigEndianBytes: &adminpb.Type_Int64_Encoding_BigEndianBytes{}}}}}}
	}
	agg.InputType, agg.StateType = int64BE(), int64BE()
	return &adminpb.Type{Kind: &adminpb.Type_AggregateType{AggregateType: agg}}
}

// familyRule is a family's GC rule: its GCPolicy when set, else the union
// of MaxVersions and MaxAge (each when set). A family without a rule (it
// keeps every cell) has nil, so that ColumnFamily.gc_rule is absent on
// the wire, as Cloud Bigtable sends it, not an empty GcRule: the clients
// tell the two apart (Node.js shows null against {}, Go's GCRuleToString
// "<never>" against "").
func familyRule(f client.FamilySpec) *adminpb.GcRule {
	if f.GCPolicy != nil {
		if r := policyToAdmin(f.GCPolicy); r.GetRule() != nil {
			return r
		}
		return nil // NoGcPolicy
	}
	var rules []*adminpb.GcRule
	if f.MaxVersions > 0 {
		rules = append(rules, policyToAdmin(client.MaxVersionsPolicy(f.MaxVersions)))
	}
	if f.MaxAge > 0 {
		rules = append(rules, policyToAdmin(client.MaxAgePolicy(f.MaxAge)))
	}
	switch len(rules) {
	case 0:
		return nil
	case 1:
		return rules[0]
	default:
		return &adminpb.GcRule{Rule: &adminpb.GcRule_Union_{Union: &adminpb.GcRule_Union{Rules: rules}}}
	}
}

// maxRuleDepth bounds the nesting of a GC rule taken from a request (the
// top rule is level 1), as the master does.
const maxRuleDepth = limits.MaxGCRuleDepth

// policyFromAdmin is the client policy of an admin GC rule (validated again
// by the master: positive versions and ages, and the nesting depth).
func policyFromAdmin(r *adminpb.GcRule) (client.GCPolicy, error) {
	return policyFromAdminDepth(r, 1)
}

func policyFromAdminDepth(r *adminpb.GcRule, depth int) (client.GCPolicy, error) {
	if depth > maxRuleDepth {
		return nil, apierr.InvalidArgument("GC rule nests deeper than %d levels", maxRuleDepth)
	}
	subs := func(rs []*adminpb.GcRule) ([]client.GCPolicy, error) {
		out := make([]client.GCPolicy, len(rs))
		for i, sr := range rs {
			p, err := policyFromAdminDepth(sr, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = p
		}
		return out, nil
	}
	switch rule := r.GetRule().(type) {
	case nil:
		return client.NoGcPolicy(), nil
	case *adminpb.GcRule_MaxNumVersions:
		return client.MaxVersionsPolicy(int(rule.MaxNumVersions)), nil
	case *adminpb.GcRule_MaxAge:
		if err := rule.MaxAge.CheckValid(); err != nil {
			return nil, apierr.InvalidArgument("GC rule max_age: %v", err)
		}
		return client.MaxAgePolicy(rule.MaxAge.AsDuration()), nil
	case *adminpb.GcRule_Union_:
		ps, err := subs(rule.Union.GetRules())
		if err != nil {
			return nil, err
		}
		return client.UnionPolicy(ps...), nil
	case *adminpb.GcRule_Intersection_:
		ps, err := subs(rule.Intersection.GetRules())
		if err != nil {
			return nil, err
		}
		return client.IntersectionPolicy(ps...), nil
	default:
		return nil, apierr.InvalidArgument("GC rule of unknown kind %T", rule)
	}
}

// policyToAdmin is the admin GC rule of a client policy.
func policyToAdmin(p client.GCPolicy) *adminpb.GcRule {
	subs := func(ps []client.GCPolicy) []*adminpb.GcRule {
		out := make([]*adminpb.GcRule, len(ps))
		for i, sp := range ps {
			out[i] = policyToAdmin(sp)
		}
		return out
	}
	switch p := p.(type) {
	case client.MaxVersionsGCPolicy:
		return &adminpb.GcRule{Rule: &adminpb.GcRule_MaxNumVersions{MaxNumVersions: int32(p)}}
	case client.MaxAgeGCPolicy:
		return &adminpb.GcRule{Rule: &adminpb.GcRule_MaxAge{MaxAge: durationpb.New(time.Duration(p))}}
	case client.UnionGCPolicy:
		return &adminpb.GcRule{Rule: &adminpb.GcRule_Union_{Union: &adminpb.GcRule_Union{Rules: subs(p.Children)}}}
	case client.IntersectionGCPolicy:
		return &adminpb.GcRule{Rule: &adminpb.GcRule_Intersection_{Intersection: &adminpb.GcRule_Intersection{Rules: subs(p.Children)}}}
	default: // NoGcPolicy, nil
		return &adminpb.GcRule{}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
