// The helpers live in @infergrid/runtime since `npm start` makes its throwaway CA with them too.
export { makeCa, makeCert } from "@infergrid/runtime";
