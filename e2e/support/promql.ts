import { parser } from '@prometheus-io/lezer-promql';

type SyntaxNode = ReturnType<typeof parser.parse>['topNode'];

/** What one PromQL expression reads: each selector's metric and matcher labels, and each grouping's labels with the metrics below it. */
export interface PromqlReferences {
  selectors: { metric: string | undefined; labels: string[] }[];
  groupings: { labels: string[]; metrics: string[] }[];
}

/**
 * Grafana's built-in interval variables, which PromQL cannot parse, replaced by a duration; the
 * other variables (`$namespace`, `$job`) stand inside quoted matcher values, which PromQL reads.
 */
export function withoutGrafanaIntervals(expr: string): string {
  return expr.replace(/\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}/g, '5m');
}

/** The references of `expr`, parsed by Prometheus' own grammar (lezer-promql); throws on a syntax error. */
export function promqlReferences(expr: string): PromqlReferences {
  const tree = parser.parse(expr);
  const text = (node: SyntaxNode): string => expr.slice(node.from, node.to);
  const unquote = (node: SyntaxNode): string => JSON.parse(text(node).replace(/^'(.*)'$/, '"$1"')) as string;
  const errors: number[] = [];
  tree.iterate({
    enter: (node) => {
      if (node.type.isError) errors.push(node.from);
    },
  });
  if (errors.length > 0) throw new Error(`not PromQL at ${errors.join(', ')}: ${expr}`);

  const references: PromqlReferences = { selectors: [], groupings: [] };
  const metricsBelow = (node: SyntaxNode): string[] => {
    const found: string[] = [];
    const cursor = node.cursor();
    do {
      if (cursor.name === 'VectorSelector') {
        const name = selectorOf(cursor.node).metric;
        if (name !== undefined) found.push(name);
      }
    } while (cursor.next() && cursor.from < node.to);
    return found;
  };
  const selectorOf = (node: SyntaxNode): { metric: string | undefined; labels: string[] } => {
    let metric = node.getChild('Identifier') ? text(node.getChild('Identifier')!) : undefined;
    const labels: string[] = [];
    for (const matcher of node.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? []) {
      const name = text(matcher.getChild('LabelName')!);
      if (name === '__name__') metric = unquote(matcher.getChild('StringLiteral')!);
      else labels.push(name);
    }
    for (const matcher of node.getChild('LabelMatchers')?.getChildren('QuotedLabelMatcher') ?? []) {
      const name = unquote(matcher.getChild('QuotedLabelName')!.getChild('StringLiteral')!);
      if (name === '__name__') metric = unquote(matcher.getChildren('StringLiteral').at(-1)!);
      else labels.push(name);
    }
    // A bare quoted name (`{"metric.name"}`) names the metric.
    for (const quoted of node.getChild('LabelMatchers')?.getChildren('QuotedLabelName') ?? []) metric = unquote(quoted.getChild('StringLiteral')!);
    return { metric, labels };
  };
  const labelsOf = (grouping: SyntaxNode): string[] => [
    ...grouping.getChildren('LabelName').map(text),
    ...grouping.getChildren('QuotedLabelName').map((quoted) => unquote(quoted.getChild('StringLiteral')!)),
  ];

  tree.iterate({
    enter: (ref) => {
      const node = ref.node;
      if (node.name === 'VectorSelector') references.selectors.push(selectorOf(node));
      if (node.name === 'AggregateExpr') {
        const grouping = node.getChild('AggregateModifier')?.getChild('GroupingLabels');
        if (grouping) references.groupings.push({ labels: labelsOf(grouping), metrics: metricsBelow(node) });
      }
      if (node.name === 'BinaryExpr') {
        const grouping = node.getChild('MatchingModifierClause')?.getChild('GroupingLabels');
        if (grouping) references.groupings.push({ labels: labelsOf(grouping), metrics: metricsBelow(node) });
      }
    },
  });
  return references;
}

/** Each metric a Prometheus text exposition declares (`# TYPE`) or has a sample of, with the label names of its samples. */
export function exposedMetrics(exposition: string): Map<string, Set<string>> {
  const metrics = new Map<string, Set<string>>();
  const labelsOf = (name: string): Set<string> => {
    let labels = metrics.get(name);
    if (labels === undefined) metrics.set(name, (labels = new Set()));
    return labels;
  };
  for (const line of exposition.split('\n')) {
    const declared = /^# TYPE (\S+) (\S+)/.exec(line);
    if (declared) {
      const [, name = '', type] = declared;
      labelsOf(name);
      // A histogram's or summary's series carry suffixes of their own.
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) labelsOf(name + suffix);
      if (type === 'summary') for (const suffix of ['_sum', '_count']) labelsOf(name + suffix);
      continue;
    }
    if (line.startsWith('#') || line.trim() === '') continue;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s/.exec(line);
    if (!sample) continue;
    const labels = labelsOf(sample[1] ?? '');
    // Label values are quoted with \" and \\ escaped: a name is what stands before an unescaped `="`.
    for (const match of (sample[2] ?? '').matchAll(/(?:^\{|,)\s*([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"/g)) labels.add(match[1] ?? '');
  }
  return metrics;
}

/** Metrics not exported by our processes that dashboards and rules may read, each with the labels it carries. */
export type Allowed = Map<string, Set<string>>;

/**
 * What `references` reads that neither `exported` (metric to label names) nor `allowed` has: a
 * metric nobody exports, a matcher label its metric never carries, a grouping label none of the
 * metrics below it carries. `targetLabels` are those Prometheus adds to every scraped series.
 */
export function unknownReferences(references: PromqlReferences, exported: Map<string, Set<string>>, targetLabels: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  for (const { metric, labels } of references.selectors) {
    if (metric === undefined) {
      problems.push(`a selector without a metric name ({${labels.join(', ')}})`);
      continue;
    }
    const carried = exported.get(metric);
    if (carried === undefined) {
      problems.push(`metric ${metric} is exported by no process`);
      continue;
    }
    for (const label of labels) if (!carried.has(label) && !targetLabels.has(label)) problems.push(`metric ${metric} has no label ${label}`);
  }
  for (const { labels, metrics } of references.groupings) {
    const carried = new Set(metrics.flatMap((metric) => [...(exported.get(metric) ?? [])]));
    for (const label of labels)
      if (!carried.has(label) && !targetLabels.has(label)) problems.push(`label ${label} (by/on) is carried by none of ${metrics.join(', ') || 'no metric'}`);
  }
  return problems;
}
