import { describe, expect, it } from "vitest";
import { histogramTotals, hopTimes, meanMsBetween } from "./hop-time.js";

const exposition = (sum: number, count: number) => `# HELP infergrid_broker_request_duration_seconds Time from receipt to answer
# TYPE infergrid_broker_request_duration_seconds histogram
infergrid_broker_request_duration_seconds_bucket{le="0.001",service="broker",protocol="grpc"} 0
infergrid_broker_request_duration_seconds_sum{service="broker",protocol="grpc"} ${sum}
infergrid_broker_request_duration_seconds_count{service="broker",protocol="grpc"} ${count}
infergrid_broker_request_duration_seconds_sum{service="broker",protocol="http"} 1
infergrid_broker_request_duration_seconds_count{service="broker",protocol="http"} 10
infergrid_broker_requests_total{protocol="grpc",code="OK",service="broker"} 99
`;

describe("hop times", () => {
  it("adds a histogram's sum and count over its label sets, and nothing else", () => {
    expect(histogramTotals(exposition(2.5, 40), "infergrid_broker_request_duration_seconds")).toEqual({ sum: 3.5, count: 50 });
    expect(histogramTotals(exposition(2.5, 40), "infergrid_frontend_request_duration_seconds")).toEqual({ sum: 0, count: 0 });
  });

  it("takes the mean of what was recorded between two readings, in ms", () => {
    const name = "infergrid_broker_request_duration_seconds";
    const before = histogramTotals(exposition(2.5, 40), name);
    const after = histogramTotals(exposition(6.5, 140), name);
    expect(meanMsBetween(before, after)).toBeCloseTo(40);
    expect(meanMsBetween(before, before)).toBeNaN();
  });

  it("splits the client's mean into the stretches of the path", () => {
    expect(hopTimes(88, 44, 22)).toEqual({ toBroker: 44, brokerToFrontend: 22, frontendAndBackend: 22 });
  });
});
