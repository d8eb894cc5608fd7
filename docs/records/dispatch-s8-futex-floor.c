#define _GNU_SOURCE
#include <linux/futex.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static _Atomic int go, done; static _Atomic long started;
static long now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000L+t.tv_nsec;}
static void fwait(_Atomic int*a,int v){syscall(SYS_futex,a,FUTEX_WAIT_PRIVATE,v,0,0,0);}
static void fwake(_Atomic int*a){syscall(SYS_futex,a,FUTEX_WAKE_PRIVATE,1,0,0,0);}
static int wcpu;
static void pin(int c){if(c<0)return;cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
struct sa{unsigned size,policy;unsigned long long flags;int nice;unsigned prio;unsigned long long rt,dl,per;unsigned umin,umax;};
static long slice;
static void* worker(void*x){pin(wcpu);if(slice){struct sa a={0};a.size=sizeof a;a.rt=slice;if(syscall(SYS_sched_setattr,0,&a,0))perror("setattr");}for(;;){while(atomic_load(&go)==0)fwait(&go,0);atomic_store(&go,0);atomic_store(&started,now());atomic_store(&done,1);fwake(&done);}}
int cmp(const void*a,const void*b){long x=*(long*)a,y=*(long*)b;return x<y?-1:x>y;}
int main(int c,char**v){wcpu=atoi(v[1]);int scpu=atoi(v[2]);slice=c>3?atol(v[3]):0;int n=2000;long*l=malloc(n*sizeof(long));pthread_t t;pthread_create(&t,0,worker,0);pin(scpu);
for(int i=0;i<n;i++){usleep(500);atomic_store(&done,0);long t0=now();atomic_store(&go,1);fwake(&go);while(atomic_load(&done)==0)fwait(&done,0);l[i]=atomic_load(&started)-t0;}
qsort(l,n,sizeof(long),cmp);printf("worker cpu %d submitter cpu %d: p50 %ld p90 %ld p99 %ld ns\n",wcpu,scpu,l[n/2],l[n*9/10],l[n*99/100]);}
